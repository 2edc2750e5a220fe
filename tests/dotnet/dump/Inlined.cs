// A process to dump for `clrmap dump --inlines`: an optimized method (AggressiveOptimization:
// jitted at full optimization at once, no tier 0) into which the JIT inlines two levels of
// AggressiveInlining methods; the innermost calls a method that is never inlined and parks on
// stdin. So the parked thread's frame for Outer returns into code of Inner, inlined into Middle,
// inlined into Outer. "ready <pid>" on stdout once parked; a line on stdin ends it. Built
// optimized (the JIT does not inline into debuggable code), with a portable PDB.
using System;
using System.Runtime.CompilerServices;

namespace Inlined
{
    public static class Program
    {
        static int Counter;

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static int Inner(int x)
        {
            Counter += x;
            if (x == 8)
            {
                Park(x); // INNER-PARK
            }
            return Counter;
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static int Middle(int x)
        {
            int y = x + 1;
            return Inner(y) * 2; // MIDDLE-CALL
        }

        [MethodImpl(MethodImplOptions.AggressiveOptimization)]
        static int Outer(int n)
        {
            int s = 0;
            for (int i = 0; i < n; i++)
            {
                s += Middle(i); // OUTER-CALL
            }
            return s;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Park(int x)
        {
            Console.WriteLine("ready " + Environment.ProcessId);
            Console.Out.Flush();
            Console.ReadLine();
        }

        public static int Main()
        {
            return Outer(20) > 0 ? 0 : 1;
        }
    }
}
