// A library compiled ahead of time by Crossgen2 into a ReadyToRun image, as the framework's own
// assemblies are: its hot method runs as ReadyToRun code, never jitted (App.cs calls it a few
// times only, under the runtime's call-counting threshold). The CLI test
// crates/clrmap-cli/tests/cli/flame_r2r_server.rs finds the `// HOT` line by reading this file.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;

namespace R2r
{
    public static class Hot
    {
        /// Spin `rounds` times; on round `mark` print the runtime's own stack trace, from this
        /// line, with the frame's IL offset and line (the oracle for the test's line).
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Spin(long rounds, long mark)
        {
            long acc = 17;
            for (long i = 0; i < rounds; i++)
            {
                acc = acc * 6364136223846793005L + (i ^ (acc >> 29)); if (i == mark) Where.Print(new StackTrace(true)); // HOT
            }
            return acc;
        }
    }

    public static class Where
    {
        /// The trace as the runtime prints it, then its first frame's method, IL offset and line.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Print(StackTrace trace)
        {
            Console.Write(trace.ToString());
            StackFrame f = trace.GetFrame(0);
            if (f != null)
            {
                Console.WriteLine("frame " + f.GetMethod()?.Name + " il " + f.GetILOffset() + " line " + f.GetFileLineNumber());
            }
        }
    }
}
