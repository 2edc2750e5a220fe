// Runtime-async (.NET 11): async methods compiled by Roslyn with `runtime-async=on` carry no
// state machine; the runtime makes two bodies of each, the async variant (the method's own IL)
// and a Task-returning thunk, both of one MethodDef (crates/clrmap-cli/tests/cli/ms_tools.rs).
// Main -> Outer -> Inner: Inner takes a StackTrace before its first await (every frame still
// on the stack) and another after it (resumed by the runtime), and prints each frame as
//   F <capture> <index> <native offset> <token hex> <IL offset> <line> <Type::Method>
// The tests find the lines by their markers, so edit freely but keep them.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading.Tasks;

static class RuntimeAsync
{
    static void Print(int capture, StackTrace st)
    {
        for (int i = 0; i < st.FrameCount; i++)
        {
            StackFrame f = st.GetFrame(i);
            var m = f.GetMethod();
            if (m == null || m.DeclaringType != typeof(RuntimeAsync) || m.Name == nameof(Print))
                continue;
            Console.WriteLine("F " + capture + " " + i + " " + f.GetNativeOffset() + " " + m.MetadataToken.ToString("X8") + " "
                + f.GetILOffset() + " " + f.GetFileLineNumber() + " RuntimeAsync::" + m.Name);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static async Task<int> Inner(int n)
    {
        Print(1, new StackTrace(true)); // INNER-BEFORE
        await Task.Yield(); // INNER-AWAIT
        Print(2, new StackTrace(true)); // INNER-AFTER
        return n + 1;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static async Task<int> Outer(int n)
    {
        int a = await Inner(n); // OUTER
        return a * 2;
    }

    static async Task<int> Main()
    {
        int r = await Outer(3); // MAIN
        Console.WriteLine("result " + r);
        return 0;
    }
}
