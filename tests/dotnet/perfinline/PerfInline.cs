// The perf test program for inlined code (crates/clrmap-cli/tests/cli/perf.rs, docs/perf.md).
// For the seconds given (default 4) it alternates two hot loops:
// - InlinedLoop, whose work is Work.Mix (Work.cs), inlined (AggressiveInlining): a profiler
//   should put the samples on Mix's own lines (MIX-FIRST..MIX-LAST);
// - FrameworkLoop, whose work is framework code inlined into it (List<int>'s indexer and Count,
//   Math.Max): the framework ships no PDB, so the samples belong on the calling line
//   (FW-CALL), never on the method's first line (FW-FIRST).
// The test finds the lines by their markers, so edit freely but keep the markers.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.CompilerServices;

static class PerfInline
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static long InlinedLoop(long n)
    {
        long acc = 1; // OWN-FIRST
        for (long i = 0; i < n; i++)
        {
            acc = Work.Mix(acc, i); // OWN-CALL
        }
        return acc;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long FrameworkLoop(List<int> list, int n)
    {
        long acc = 0; // FW-FIRST
        for (int i = 0; i < n; i++)
        {
            acc += list[i & 1023] ^ Math.Max(i, list.Count); // FW-CALL
        }
        return acc;
    }

    static int Main(string[] args)
    {
        double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 4;
        var list = new List<int>();
        for (int i = 0; i < 1024; i++)
        {
            list.Add(i * 7);
        }
        long own = 0, framework = 0;
        int rounds = 0;
        Stopwatch clock = Stopwatch.StartNew();
        while (clock.Elapsed.TotalSeconds < seconds)
        {
            own ^= InlinedLoop(5000000);
            framework ^= FrameworkLoop(list, 5000000);
            rounds++;
        }
        Console.WriteLine("rounds " + rounds + " " + (own & 1) + " " + (framework & 1));
        return 0;
    }
}
