// The program of the stacktrace tests (crates/clrmap/tests/integration/stacktrace.rs,
// crates/clrmap-cli/tests/cli/stacktrace.rs): it throws through generic, lambda, local-function,
// nested-type, iterator and async frames, and prints each Exception.ToString() and some
// new StackTrace(true).ToString(), between marker lines. The tests run it with its PDB beside it
// and without, with Switch.System.Diagnostics.StackTrace.ShowILOffsets on (runtimeconfig.json).
// Frames of Lib.dll (built without a PDB) and of the framework stay `token` frames in both runs.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading.Tasks;

namespace Shop
{
    public class Repo<T>
    {
        public T Get(int i)
        {
            if (i < 0)
                throw new ArgumentOutOfRangeException(nameof(i));
            return default(T);
        }

        public static U Convert<U>(T x, Func<T, U> f)
        {
            return f(x);
        }
    }

    public static class Pricing
    {
        public class Nested
        {
            public class Deeper
            {
                public static int Fail(string where)
                {
                    int Local(int k)
                    {
                        if (k > 2)
                            throw new InvalidOperationException("boom at " + where);
                        return k + 1;
                    }
                    int s = 0;
                    for (int i = 0; i < 5; i++)
                        s += Local(i);
                    return s;
                }
            }
        }

        public static string Report(string where)
        {
            return Repo<string>.Convert<int>(where, w => Nested.Deeper.Fail(w)).ToString();
        }

        public static async Task<int> LoadAsync(int n)
        {
            await Task.Yield();
            return await Inner(n);
        }

        static async Task<int> Inner(int n)
        {
            await Task.Delay(1);
            if (n > 0)
                Report("async");
            return n;
        }

        public static IEnumerable<int> Items()
        {
            yield return 1;
            Console.WriteLine(new StackTrace(true).ToString());
            yield return 2;
        }

        public static async Task<int> SyncPart(int depth)
        {
            if (depth > 0)
                await SyncPart(depth - 1);
            else
                Console.WriteLine(new StackTrace(true).ToString());
            await Task.Yield();
            return depth;
        }

        public static void Padding0() { }
        public static void Padding1() { }
        public static void Padding2() { }
        public static void Padding3() { }
        public static void Padding4() { }

        public static void ViaLib()
        {
            Lib.Callbacks.Run(() =>
            {
                var list = new List<int> { 1, 2, 3 };
                list.ForEach(x =>
                {
                    if (x == 3)
                        throw new NotSupportedException("via lib and the framework");
                });
            });
        }
    }

    public static class Program
    {
        static void Section(string name)
        {
            Console.WriteLine("==== " + name + " ====");
        }

        public static int Main()
        {
            Section("sync");
            try { Pricing.Report("sync"); } catch (Exception e) { Console.WriteLine(e.ToString()); }
            Section("async");
            try { Pricing.LoadAsync(1).GetAwaiter().GetResult(); } catch (Exception e) { Console.WriteLine(e.ToString()); }
            Section("iterator");
            foreach (var i in Pricing.Items()) { }
            Section("async stubs");
            Pricing.SyncPart(1).GetAwaiter().GetResult();
            Section("inner");
            try { new Repo<int>().Get(-1); } catch (Exception e) { Console.WriteLine(new Exception("outer", e).ToString()); }
            Section("lib");
            try { Pricing.ViaLib(); } catch (Exception e) { Console.WriteLine(e.ToString()); }
            Section("aggregate");
            try { Task.WhenAll(Pricing.LoadAsync(2), Pricing.LoadAsync(3)).Wait(); } catch (Exception e) { Console.WriteLine(e.ToString()); }
            Section("end");
            return 0;
        }
    }
}
