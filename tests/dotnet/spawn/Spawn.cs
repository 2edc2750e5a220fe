// A .NET program that starts another .NET program and waits for it: the child inherits the
// environment, so under `clrmap profile` it loads the profiler with the same capture path.
//   Spawn.dll DOTNET CHILD.dll
using System;
using System.Diagnostics;

static class Spawn
{
    static int Main(string[] args)
    {
        var psi = new ProcessStartInfo(args[0], args[1]) { UseShellExecute = false };
        using (var child = Process.Start(psi))
        {
            child.WaitForExit();
            Console.WriteLine("child exited " + child.ExitCode);
            return child.ExitCode;
        }
    }
}
