// The CPU-profile test program (crates/clrmap-cli/tests/cli/cpu.rs, docs/attach.md): a profile
// of it recorded by the runtime's own sampler (`clrmap trace collect --cpu`) must show its two
// hot spots. For the seconds given (default 4) it alternates between a loop in its own jitted
// code (HOT-OWN, one line doing all the work) and a loop calling a ReadyToRun framework method,
// string.GetHashCode, whose work is in System.Marvin.ComputeHash32 (HOT-FRAMEWORK).
// It prints "ready" once running (an attaching test waits for it) and "done" at the end.
// The test finds the lines by their markers, so edit freely but keep the markers.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;

static class Cpu
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static long OwnLoop(long n)
    {
        long acc = 1;
        for (long i = 0; i < n; i++)
        {
            acc = acc * 31 + (i ^ (acc >> 7)) + acc % 1000003 + i % 7919; // HOT-OWN
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
        Console.WriteLine("ready");
        Console.Out.Flush();
        Stopwatch clock = Stopwatch.StartNew();
        while (clock.Elapsed.TotalSeconds < seconds)
        {
            own ^= OwnLoop(5000000);
            framework ^= FrameworkLoop(s, 10000);
            rounds++;
        }
        Console.WriteLine("done " + rounds + " " + (own & 1) + " " + (framework & 1));
        return 0;
    }
}
