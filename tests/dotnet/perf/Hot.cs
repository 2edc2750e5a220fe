// The Linux perf test program (crates/clrmap-cli/tests/cli/perf.rs, docs/perf.md).
// It spends its time in two hot loops on known lines, alternately, for the seconds given
// (default 4): one in its own jitted code (HOT-OWN), one calling a ReadyToRun framework method,
// string.GetHashCode, whose work is in System.Marvin::ComputeHash32 (HOT-FRAMEWORK).
// The test finds the lines by their markers, so edit freely but keep the markers.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;

static class Hot
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static long OwnLoop(long n)
    {
        long acc = 1;
        for (long i = 0; i < n; i++)
        {
            acc = acc * 31 + (i ^ (acc >> 7)); // HOT-OWN
        }
        return acc;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int FrameworkLoop(string s, int n)
    {
        int h = 0;
        for (int i = 0; i < n; i++)
        {
            h ^= s.GetHashCode(); // HOT-FRAMEWORK
        }
        return h;
    }

    static int Main(string[] args)
    {
        double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 4;
        string s = new string('x', 2048);
        long own = 0;
        int framework = 0;
        int rounds = 0;
        Stopwatch clock = Stopwatch.StartNew();
        while (clock.Elapsed.TotalSeconds < seconds)
        {
            own ^= OwnLoop(20000000);
            framework ^= FrameworkLoop(s, 20000);
            rounds++;
        }
        Console.WriteLine("rounds " + rounds + " " + (own & 1) + " " + (framework & 1));
        return 0;
    }
}
