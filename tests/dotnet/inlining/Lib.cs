// The other module of tests/dotnet/inlining (Prog.cs): Lib.dll, with its own portable PDB. Its
// AggressiveInlining methods are inlined into Prog's bodies, two levels deep (Scramble, then
// Rotate); Opaque is NoInlining and must never appear as an inlinee.
// A line that calls a method ends with a comment `// CALLER calls CALLEE`: the tests read the
// expected line of a call site from it.
using System.Runtime.CompilerServices;

namespace InlLib
{
    public static class LibMath
    {
        public static int Sink;

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        public static int Scramble(int x)
        {
            Sink += x;
            int y = x * 31;
            y = Rotate(y); // Scramble calls Rotate
            return y + Opaque(x); // Scramble calls Opaque
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        public static int Rotate(int y)
        {
            Sink ^= y;
            int r = (y << 5) | (int)((uint)y >> 27);
            return r ^ Sink;
        }

        // Generic, and instantiated by Prog over its own struct: the instantiation's loader
        // module is Prog.dll, the method's module Lib.dll.
        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        public static T Pick<T>(T a, T b, bool first)
        {
            Sink++;
            if (first)
                return a;
            return b;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Opaque(int x)
        {
            return x + 1;
        }
    }
}
