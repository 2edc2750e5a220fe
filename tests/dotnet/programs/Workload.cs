// A deterministic workload for the profiler and trace tests: generics over value and reference
// types (shared __Canon code), generic methods, lambdas and LINQ, try/catch/finally (funclets),
// and loops long enough for tier-1 recompilation. Its stdout is fixed.
using System;
using System.Collections.Generic;
using System.Linq;

class Box<T>
{
    public T Value;
    public Box(T v) { Value = v; }
    public Box<U> Map<U>(Func<T, U> f) { return new Box<U>(f(Value)); }
}

static class Workload
{
    static T Max<T>(T a, T b) where T : IComparable<T> { return a.CompareTo(b) >= 0 ? a : b; }

    static int Guarded(int i)
    {
        int r = 0;
        try
        {
            if (i % 7 == 0) throw new InvalidOperationException("seven");
            r = i * 2;
        }
        catch (InvalidOperationException)
        {
            r = -1;
        }
        finally
        {
            r += 1;
        }
        return r;
    }

    // Loop-free, so it starts at tier 0 on 3.1 too (3.1 jits methods with loops fully optimized),
    // and is called often enough, across the tiering delay, to be promoted to tier 1.
    static long Step(long acc, int i)
    {
        if (i % 3 == 0) return acc + ((i * 31) ^ (i >> 3));
        return acc + (i ^ 5);
    }

    static int Main()
    {
        var ints = new List<int>();
        for (int i = 0; i < 50; i++) ints.Add(i * 3 % 17);
        var strs = ints.Select(i => "s" + i).ToList();
        var dict = new Dictionary<string, int>();
        foreach (var s in strs) dict[s] = s.Length;
        Console.WriteLine("max " + Max(3, 9) + " " + Max("a", "b"));
        Console.WriteLine("linq " + ints.Where(i => i % 2 == 0).Sum() + " " + strs.OrderBy(s => s).First());
        Console.WriteLine("box " + new Box<int>(21).Map(x => x * 2).Value + " " + new Box<string>("x").Map(s => s + "y").Value);
        int g = 0;
        for (int i = 0; i < 40; i++) g += Guarded(i);
        Console.WriteLine("guarded " + g);
        long hot = 0;
        for (int round = 0; round < 40; round++)
        {
            for (int i = 0; i < 2000; i++) hot = Step(hot, i);
            System.Threading.Thread.Sleep(10);
        }
        Console.WriteLine("hot " + hot);
        Console.WriteLine("dict " + dict.Count + " " + string.Join(",", dict.Keys.Take(3)));
        // More framework code: formatting, parsing, sorting, grouping, sets, StringBuilder.
        var sb = new System.Text.StringBuilder();
        foreach (var grp in Enumerable.Range(0, 30).GroupBy(i => i % 4).OrderBy(grp0 => grp0.Key))
            sb.Append(grp.Key).Append(':').Append(grp.Count()).Append(' ');
        var arr = ints.ToArray();
        Array.Sort(arr);
        var set = new HashSet<string>(strs);
        Console.WriteLine("more " + sb.ToString().Trim() + " " + arr[arr.Length - 1] + " " + set.Count + " "
            + int.Parse("123").ToString("X") + " " + string.Format("{0:D4}", 42) + " " + 3.5.ToString(System.Globalization.CultureInfo.InvariantCulture)
            + " " + string.Concat(strs.Skip(5).Take(2)) + " " + "Hello".ToUpperInvariant().Replace('L', 'l').IndexOf('l'));
        return 0;
    }
}
