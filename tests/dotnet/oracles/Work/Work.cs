// The program Microsoft's tools and clrmap both look at (crates/clrmap-cli/tests/cli/ms_tools.rs):
//   Work hot SECONDS   Main -> Outer -> Middle -> Spin, a loop whose work is on one line (HOT), for
//                      SECONDS; prints "ready" when it starts and "done" at the end.
//   Work park          Main -> Outer -> Middle -> Park, which blocks reading stdin (PARK): prints
//                      "parked" first; ends when stdin closes.
// The tests find the lines by their markers, so edit freely but keep them.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;

static class Work
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Spin(long n)
    {
        long acc = 1;
        for (long i = 0; i < n; i++)
        {
            acc = acc * 31 + (i ^ (acc >> 7)) + acc % 1000003 + i % 7919; // HOT
        }
        return acc;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static string Park()
    {
        Console.WriteLine("parked");
        Console.Out.Flush();
        return Console.In.ReadToEnd(); // PARK
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Middle(bool park, long n)
    {
        if (park)
            return Park().Length; // MIDDLE-PARK
        return Spin(n); // MIDDLE-SPIN
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Outer(bool park, long n)
    {
        return Middle(park, n) + 1; // OUTER
    }

    static int Main(string[] args)
    {
        string mode = args.Length > 0 ? args[0] : "hot";
        if (mode == "park")
        {
            Outer(true, 0); // MAIN-PARK
            return 0;
        }
        double seconds = args.Length > 1 ? double.Parse(args[1], System.Globalization.CultureInfo.InvariantCulture) : 2;
        Console.WriteLine("ready");
        Console.Out.Flush();
        long acc = 0;
        int rounds = 0;
        Stopwatch clock = Stopwatch.StartNew();
        while (clock.Elapsed.TotalSeconds < seconds)
        {
            acc ^= Outer(false, 2000000); // MAIN
            rounds++;
        }
        Console.WriteLine("done " + rounds + " " + (acc & 1));
        return 0;
    }
}
