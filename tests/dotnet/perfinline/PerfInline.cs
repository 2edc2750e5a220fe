// The perf test program for inlined code (crates/clrmap-cli/tests/cli/perf.rs, docs/perf.md).
// For the seconds given (default 4) it alternates two hot loops:
// - InlinedLoop, whose work is Work.Mix (Work.cs), inlined (AggressiveInlining): a profiler
//   should put the samples on Mix's own lines (MIX-FIRST..MIX-LAST);
// - FrameworkLoop, whose work is framework code inlined into it (List<int>'s indexer and Count,
//   Math.Max): the framework ships no PDB, so the samples belong on the calling line
//   (FW-CALL), never on the method's first line (FW-FIRST).
// - StubLoop, an interface call on three classes in turn: the call goes through the runtime's
//   virtual stub dispatch (resolve stubs), code in no method, which the runtime names only in
//   its own perf map ("stub<N> GenerateResolveStub<...>").
// The test finds the lines by their markers, so edit freely but keep the markers.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.CompilerServices;

interface IShape
{
    long Area(long x);
}

sealed class Square : IShape
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public long Area(long x) { return x * x; }
}

sealed class Segment : IShape
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public long Area(long x) { return x + 1; }
}

sealed class Triangle : IShape
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public long Area(long x) { return x * 3 / 2; }
}

static class PerfInline
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static long StubLoop(IShape[] shapes, int n)
    {
        long acc = 0;
        for (int i = 0; i < n; i++)
        {
            acc += shapes[i % 3].Area(i); // STUB-CALL
        }
        return acc;
    }

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
        var shapes = new IShape[] { new Square(), new Segment(), new Triangle() };
        long own = 0, framework = 0, stubs = 0;
        int rounds = 0;
        Stopwatch clock = Stopwatch.StartNew();
        while (clock.Elapsed.TotalSeconds < seconds)
        {
            own ^= InlinedLoop(5000000);
            framework ^= FrameworkLoop(list, 5000000);
            stubs ^= StubLoop(shapes, 1000000);
            rounds++;
        }
        Console.WriteLine("rounds " + rounds + " " + (own & 1) + " " + (framework & 1) + " " + (stubs & 1));
        return 0;
    }
}
