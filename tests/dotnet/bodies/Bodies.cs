// One run of this program is recorded by the clrmap profiler and by an EventPipe session at once
// (crates/clrmap/tests/integration/bodies.rs): the same bodies must get the same names from both,
// and from the images for ReadyToRun code. It names bodies every way the notation has to handle:
// `Main(string[])`, nested types (`Outer/Inner`, an iterator class), generic types instantiated
// over a primitive, a value type, an array and a reference type (shared code), generic methods,
// and framework code (List, Dictionary, StringBuilder, LINQ) called often enough to be re-jitted
// at tier 1 where tiering is on. The small methods are never inlined, so each has bodies of its own. Protocol on stdin/stdout, one line each:
//   prints "ready", waits for a line; runs the hot rounds, prints "done N", waits for a line; exits.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Text;
using System.Threading;

class Box<T>
{
    T value;
    [MethodImpl(MethodImplOptions.NoInlining)]
    public Box(T v) { value = v; }
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static Box<T> Make(T v) { return new Box<T>(v); }
    [MethodImpl(MethodImplOptions.NoInlining)]
    public T Get() { return value; }
}

struct Pt
{
    public int X;
    public Pt(int x) { X = x; }
}

class Outer
{
    public class Inner
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public int Twice(int x) { return x * 2; }
    }

    public static IEnumerable<int> Count(int n)
    {
        for (int i = 0; i < n; i++) yield return i;
    }
}

static class Bodies
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    static T Id<T>(T x) { return x; }

    static long Work(int round)
    {
        long n = round;
        var sb = new StringBuilder();
        var d = new Dictionary<string, int>();
        var l = new List<int>();
        for (int i = 0; i < 200; i++)
        {
            sb.Append(i).Append(',');
            d[i.ToString()] = i;
            l.Add(i);
            n += Box<int>.Make(i).Get() + Box<string>.Make("x").Get().Length;
            n += Box<Pt>.Make(new Pt(i)).Get().X + Box<int[]>.Make(new int[1]).Get().Length;
            n += Id(i) + Id("s").Length + Id(new KeyValuePair<int, string>(i, "v")).Key;
            n += new Outer.Inner().Twice(i);
        }
        foreach (var x in Outer.Count(10)) n += x;
        n += l.Where(x => x % 3 == 0).Sum() + sb.Length + d.Count;
        return n;
    }

    static void Main(string[] args)
    {
        Console.WriteLine("ready");
        Console.Out.Flush();
        Console.ReadLine();
        long total = 0;
        // Over 30 calls each, with pauses longer than the call-counting delay (100 ms in all):
        // tier 0 and ReadyToRun code is re-jitted at tier 1 while this runs.
        for (int r = 0; r < 40; r++)
        {
            total += Work(r);
            Thread.Sleep(30);
        }
        Console.WriteLine("done " + total);
        Console.Out.Flush();
        Console.ReadLine();
    }
}
