// The `clrmap flame --running` test program (crates/clrmap-cli/tests/cli/flame_running.rs,
// docs/flame.md): one thread spins in its own code (HOT) for the seconds given (default 4), while
// the thread pool's workers, woken by a burst of short work items at start-up, wait for the rest
// of the run (no timer: its callbacks would wake a worker, which then spins a while in managed
// code looking for more work, and that is running).
using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using System.Runtime.CompilerServices;

static class IdleProg
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Spin(long n, long acc)
    {
        for (long i = 0; i < n; i++)
        {
            acc = acc * 31 + (i ^ (acc >> 7)); // HOT
        }
        return acc;
    }

    static int Main(string[] args)
    {
        double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 4;
        // Wake the thread pool: a burst of short work items starts its workers (and its gate
        // thread), which then wait for work for the rest of the run.
        var tasks = new Task[32];
        for (int t = 0; t < tasks.Length; t++)
        {
            tasks[t] = Task.Run(() => Thread.Sleep(20));
        }
        Task.WaitAll(tasks);
        long acc = 1;
        Stopwatch clock = Stopwatch.StartNew();
        while (clock.Elapsed.TotalSeconds < seconds)
        {
            acc = Spin(1000000, acc);
        }
        Console.WriteLine(acc & 1);
        return 0;
    }
}
