// A long-running program for the diagnostics-port tests (crates/clrmap/tests/integration/attach.rs):
// it jits many methods (generics over value and reference types, lambdas, LINQ, try/finally), says
// "ready" on stdout, then obeys commands on stdin, one per line:
//   jit   jit a second batch of methods (after the attach), then say "jitted"
//   exit  exit with status 0 (so does the end of stdin)
// Started normally: no EventPipe environment variables.
using System;
using System.Collections.Generic;
using System.Linq;

class Pair<T, U>
{
    public T First;
    public U Second;
    public Pair(T a, U b) { First = a; Second = b; }
    public Pair<U, T> Swap() { return new Pair<U, T>(Second, First); }
    public override string ToString() { return "(" + First + ", " + Second + ")"; }
}

class Box<T>
{
    T value;
    public Box(T v) { value = v; }
    public T Get() { return value; }
    public Box<T> With(T v) { return new Box<T>(v); }
    public bool Same(T other) { return EqualityComparer<T>.Default.Equals(value, other); }
    public string Show() { return "[" + value + "]"; }
}

static class Attach
{
    // One jitted body per value type for each generic method and each method of Box<T> and Pair<T, U>.
    static int Many<T>(T a, T b)
    {
        var box = new Box<T>(a).With(b);
        int n = box.Same(a) ? 1 : 0;
        n += box.Show().Length + Pick(a, b, n == 0).ToString().Length;
        n += new Pair<T, int>(box.Get(), n).Swap().ToString().Length;
        return n;
    }

    static long ManyTypes()
    {
        long n = 0;
        n += Many(1, 2) + Many(1L, 2L) + Many((short)1, (short)2) + Many((byte)1, (byte)2);
        n += Many((sbyte)1, (sbyte)2) + Many((ushort)1, (ushort)2) + Many(1u, 2u) + Many(1ul, 2ul);
        n += Many(1.5f, 2.5f) + Many(1.5, 2.5) + Many(1.5m, 2.5m) + Many('a', 'b') + Many(true, false);
        n += Many(new DateTime(2020, 1, 1), new DateTime(2021, 1, 1)) + Many(TimeSpan.FromSeconds(1), TimeSpan.FromSeconds(2));
        n += Many(Guid.Empty, Guid.Empty) + Many(new KeyValuePair<int, int>(1, 2), new KeyValuePair<int, int>(3, 4));
        return n;
    }

    static T Pick<T>(T a, T b, bool first) { return first ? a : b; }

    static int Guarded(int i)
    {
        int r = 0;
        try
        {
            if (i % 5 == 0) throw new ArgumentException("five");
            r = i + 1;
        }
        catch (ArgumentException)
        {
            r = -1;
        }
        finally
        {
            r *= 2;
        }
        return r;
    }

    static long Before()
    {
        long acc = 0;
        var list = new List<int>();
        for (int i = 0; i < 100; i++) list.Add(i * 7 % 23);
        acc += list.Where(x => x % 2 == 1).Select(x => (long)x * 3).Sum();
        acc += list.OrderBy(x => -x).Take(5).Sum();
        var words = list.Select(x => "w" + x).Distinct().ToDictionary(w => w, w => w.Length);
        acc += words.Values.Sum();
        acc += new Pair<int, string>(1, "a").Swap().ToString().Length;
        acc += new Pair<string, double>("b", 2.5).Swap().ToString().Length;
        acc += Pick(1, 2, true) + Pick("x", "yy", false).Length;
        for (int i = 0; i < 20; i++) acc += Guarded(i);
        acc += string.Join(",", list.GroupBy(x => x % 4).Select(g => g.Key + ":" + g.Count())).Length;
        return acc;
    }

    static long After()
    {
        long acc = 0;
        // Only mscorlib and System.Core types: mcs's System.dll types do not resolve on .NET Core.
        var q = new List<Pair<long, int>>();
        for (int i = 0; i < 30; i++) q.Add(new Pair<long, int>(i, i * 2));
        foreach (var p in q) acc += p.First + p.Second;
        acc += Enumerable.Range(0, 50).Aggregate(0L, (a, x) => a + x * x);
        acc += Enumerable.Range(0, 20).Select(i => "s" + (i % 7)).Distinct().OrderBy(x => x).Count();
        return acc;
    }

    static int Main()
    {
        Console.WriteLine("before " + Before() + " " + ManyTypes());
        Console.WriteLine("ready");
        Console.Out.Flush();
        string line;
        while ((line = Console.ReadLine()) != null)
        {
            line = line.Trim();
            if (line == "exit") break;
            if (line == "jit")
            {
                Console.WriteLine("after " + After());
                Console.WriteLine("jitted");
                Console.Out.Flush();
            }
        }
        return 0;
    }
}
