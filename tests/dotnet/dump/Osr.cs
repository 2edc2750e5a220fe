// A process to dump for jitted debug info with OSR patchpoint info: a Release build, so `Loop`
// and `Main` (each with a loop, run few times) are jitted at tier 0 with patchpoints, and the
// runtime stores the JIT's PatchpointInfo record before their debug info. `Park` prints the
// runtime's own stack trace of its callers ("S", method, IL offset, line per frame), then
// "ready <pid>", and waits on stdin.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
public static class Program
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Park()
    {
        var t = new StackTrace(1, true);
        for (int i = 0; i < t.FrameCount; i++)
        {
            var f = t.GetFrame(i);
            Console.WriteLine("S " + f.GetMethod().Name + " " + f.GetILOffset() + " " + f.GetFileLineNumber());
        }
        Console.WriteLine("ready " + Environment.ProcessId);
        Console.Out.Flush();
        Console.ReadLine();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int Loop(int n)
    {
        int s = 0;
        for (int i = 0; i < n; i++)
        {
            s += i * 3;
            if (i == 3)
            {
                Park();
            }
        }
        return s;
    }

    public static int Main()
    {
        int s = 0;
        for (int k = 0; k < 2; k++)
        {
            s += Loop(5);
        }
        return s > 0 ? 0 : 1;
    }
}
