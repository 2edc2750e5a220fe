// A process to dump. `live`: several threads parked in known places (a deadlock of three threads,
// a deep recursion, async continuations waiting on a task, a thread inside framework code), then
// "ready <pid>" on stdout and a wait on stdin while the test runs createdump. `crash`: an unhandled
// exception thrown through nested frames, for the runtime's own crash dump. Before "ready", the
// thread inside framework code prints the runtime's own stack trace of the comparer's callers
// ("S", method, IL offset, line per frame): the IL offsets and lines a dump's frames must show.
// One more thread sits inside a signal handler, for the native unwind through the kernel's signal
// frame.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Dumpee
{
    public static class Locks
    {
        static readonly object A = new object(), B = new object(), C = new object();
        static readonly CountdownEvent Held = new CountdownEvent(3);

        public static void Take(object first, object second)
        {
            lock (first)
            {
                Held.Signal();
                Held.Wait();
                lock (second)
                {
                    Console.WriteLine("never");
                }
            }
        }

        public static void Start()
        {
            new Thread(() => Take(A, B)) { IsBackground = true, Name = "deadlock-1" }.Start();
            new Thread(() => Take(B, C)) { IsBackground = true, Name = "deadlock-2" }.Start();
            new Thread(() => Take(C, A)) { IsBackground = true, Name = "deadlock-3" }.Start();
            while (Held.CurrentCount > 0)
            {
                Thread.Sleep(10);
            }
        }
    }

    public static class Deep
    {
        public static readonly ManualResetEventSlim Reached = new ManualResetEventSlim();
        static readonly ManualResetEventSlim Never = new ManualResetEventSlim();

        public static int Recurse(int depth)
        {
            if (depth == 0)
            {
                Reached.Set();
                Never.Wait();
                return 0;
            }
            return Recurse(depth - 1) + 1;
        }
    }

    public static class Chains
    {
        public static readonly TaskCompletionSource<int> Gate = new TaskCompletionSource<int>();
        public static readonly ManualResetEventSlim Reached = new ManualResetEventSlim();
        static readonly ManualResetEventSlim Never = new ManualResetEventSlim();

        public static async Task<int> Outer()
        {
            int v = await Middle();
            return v + 1;
        }

        static async Task<int> Middle()
        {
            int v = await Inner();
            return v * 2;
        }

        static async Task<int> Inner()
        {
            await Task.Yield();
            // A continuation, run by a thread-pool thread, parked here.
            Reached.Set();
            Never.Wait();
            return await Gate.Task;
        }
    }

    public sealed class Blocking : IComparer<int>
    {
        public static readonly ManualResetEventSlim Inside = new ManualResetEventSlim();
        static readonly ManualResetEventSlim Never = new ManualResetEventSlim();

        public static readonly StringBuilder Callers = new StringBuilder();

        public int Compare(int x, int y)
        {
            if (!Inside.IsSet)
            {
                var trace = new StackTrace(1, true);
                for (int i = 0; i < trace.FrameCount; i++)
                {
                    var m = trace.GetFrame(i).GetMethod();
                    var t = m == null ? null : m.DeclaringType;
                    if (t != null && t.IsGenericType)
                        t = t.GetGenericTypeDefinition();
                    Callers.Append("S\t").Append(t == null ? "" : t.FullName).Append("::").Append(m == null ? "" : m.Name)
                           .Append('\t').Append(trace.GetFrame(i).GetILOffset())
                           .Append('\t').Append(trace.GetFrame(i).GetFileLineNumber()).Append('\n');
                }
            }
            Inside.Set();
            Never.Wait();
            return x.CompareTo(y);
        }

        public static void SortForever()
        {
            var items = new List<int> { 3, 1, 2 };
            items.Sort(new Blocking());
        }
    }

    // A thread inside a signal handler: SIGUSR1's handler is libc's own `sleep` (it takes the signal
    // number, 10, as its seconds), raised on this thread over and over, so whenever the dump is
    // taken the thread is in `sleep`, below the kernel's signal frame, below `raise`.
    public static class Signals
    {
        [DllImport("libc.so.6", EntryPoint = "signal")]
        static extern IntPtr Signal(int signo, IntPtr handler);

        [DllImport("libc.so.6", EntryPoint = "raise")]
        static extern int Raise(int signo);

        public static readonly ManualResetEventSlim Installed = new ManualResetEventSlim();

        public static void SleepInHandler()
        {
            IntPtr sleep = NativeLibrary.GetExport(NativeLibrary.Load("libc.so.6"), "sleep");
            Signal(10, sleep);
            Installed.Set();
            while (true)
            {
                Raise(10);
            }
        }
    }

    public static class Program
    {
        static void Thrower(int n)
        {
            if (n == 0)
            {
                throw new InvalidOperationException("dumpee crash");
            }
            Thrower(n - 1);
        }

        static void Crash()
        {
            Thrower(3);
        }

        public static int Main(string[] args)
        {
            string mode = args.Length > 0 ? args[0] : "live";
            if (mode == "crash")
            {
                Crash();
                return 0;
            }
            // `live-big`: about 1 GB of touched heap first, for measuring a large core.
            var ballast = new List<byte[]>();
            if (mode == "live-big")
            {
                for (int i = 0; i < 1000; i++)
                {
                    var block = new byte[1 << 20];
                    for (int j = 0; j < block.Length; j += 4096)
                    {
                        block[j] = 1;
                    }
                    ballast.Add(block);
                }
            }
            Locks.Start();
            new Thread(() => Deep.Recurse(200)) { IsBackground = true, Name = "deep" }.Start();
            Deep.Reached.Wait();
            new Thread(Blocking.SortForever) { IsBackground = true, Name = "framework" }.Start();
            Blocking.Inside.Wait();
            Task<int> chain = Chains.Outer();
            Chains.Reached.Wait();
            new Thread(Signals.SleepInHandler) { IsBackground = true, Name = "signal" }.Start();
            Signals.Installed.Wait();
            Thread.Sleep(200);
            Console.Write(Blocking.Callers.ToString());
            Console.WriteLine("ready " + Environment.ProcessId);
            Console.Out.Flush();
            Console.In.ReadLine();
            GC.KeepAlive(chain);
            GC.KeepAlive(ballast);
            return 0;
        }
    }
}
