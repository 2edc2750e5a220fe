// Calls the ReadyToRun library's hot method for about SECONDS seconds (default 2), in calls of
// 200M rounds each: a handful of calls, too few for tiered compilation to rejit it, so the samples
// land in its ReadyToRun code. The first call prints the runtime's stack trace from the hot line.
using System;
using System.Diagnostics;
using System.Globalization;

static class App
{
    static int Main(string[] args)
    {
        double seconds = args.Length > 0 ? double.Parse(args[0], CultureInfo.InvariantCulture) : 2;
        var clock = Stopwatch.StartNew();
        long acc = 0;
        int calls = 0;
        do
        {
            acc ^= R2r.Hot.Spin(200_000_000, calls == 0 ? 1_000 : -1);
            calls++;
        } while (clock.Elapsed.TotalSeconds < seconds);
        Console.WriteLine("calls " + calls + " acc " + acc);
        return 0;
    }
}
