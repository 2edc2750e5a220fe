// The perf inline test program's other file (see PerfInline.cs): a small method the JIT must
// inline into its caller, whose work is on its own lines. Keep the markers.
using System.Runtime.CompilerServices;

static class Work
{
    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    public static long Mix(long acc, long i)
    {
        long x = acc * 31 + (i ^ (acc >> 7)); // MIX-FIRST
        x ^= x << 13;
        x ^= x >> 7;
        x *= 0x2545F4914F6CDD1DL;
        return x + (x >> 17); // MIX-LAST
    }
}
