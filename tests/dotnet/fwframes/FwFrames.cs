// The runtime's own stack traces through framework code: callbacks that the framework calls
// (sorting, LINQ, dictionaries, sorted collections, ForEach) capture `new StackTrace(false)`, and
// exceptions thrown inside the framework are caught and printed with `new StackTrace(e, false)`.
// For every frame, one line:
//   F <tag> <capture> <index> <module file> 0x<MethodDef token> <native offset> <IL offset> <Type::Method>
// The clrmap-cli test fw_oracle.rs runs this under `clrmap trace collect` and `clrmap profile` and
// compares clrmap's IL offset for (the method's code start + native offset) with the runtime's.
// Argument: how many rounds (default 4).
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Text;

static class FwFrames
{
    static int captureId;
    static int calls;
    static readonly StringBuilder Out = new StringBuilder();

    static void Print(string tag, StackTrace st)
    {
        int id = ++captureId;
        for (int i = 0; i < st.FrameCount; i++)
        {
            StackFrame f = st.GetFrame(i);
            var m = f == null ? null : f.GetMethod();
            if (m == null)
                continue;
            Out.Append("F\t").Append(tag).Append('\t')
               .Append(id).Append('\t')
               .Append(i).Append('\t')
               .Append(m.Module.Name).Append('\t')
               .Append("0x").Append(m.MetadataToken.ToString("X8")).Append('\t')
               .Append(f.GetNativeOffset()).Append('\t')
               .Append(f.GetILOffset()).Append('\t')
               .Append(m.DeclaringType == null ? "" : m.DeclaringType.FullName).Append("::").Append(m.Name)
               .Append('\n');
        }
    }

    // Every few calls of a callback, the stack as the runtime sees it from inside the framework.
    static void Capture(string tag)
    {
        if (calls++ % 5 == 0)
            Print(tag, new StackTrace(false));
    }

    sealed class NameComparer : IEqualityComparer<string>, IComparer<string>
    {
        public bool Equals(string a, string b) { Capture("eq"); return string.Equals(a, b); }
        public int GetHashCode(string s) { Capture("hash"); return s.Length; }
        public int Compare(string a, string b) { Capture("cmp"); return string.CompareOrdinal(a, b); }
    }

    sealed class IntComparer : IComparer<int>
    {
        public int Compare(int a, int b) { Capture("icmp"); return a.CompareTo(b); }
    }

    static void Throws(string tag, Action a)
    {
        try
        {
            a();
        }
        catch (Exception e)
        {
            Print(tag, new StackTrace(e, false));
        }
    }

    static int Main(string[] args)
    {
        int rounds = args.Length > 0 ? int.Parse(args[0]) : 4;
        var names = new[] { "delta", "alpha", "kilo", "echo", "bravo", "hotel", "golf", "india", "charlie", "foxtrot", "juliet", "lima" };
        for (int r = 0; r < rounds; r++)
        {
            var ints = new int[24];
            for (int i = 0; i < ints.Length; i++)
                ints[i] = (i * 7919 + r * 31) % 101;

            // Sorting: Array.Sort and List.Sort with a Comparison, Array.Sort with an IComparer.
            var a1 = (int[])ints.Clone();
            Array.Sort(a1, (x, y) => { Capture("asort"); return x.CompareTo(y); });
            var l1 = new List<string>(names);
            l1.Sort((x, y) => { Capture("lsort"); return string.CompareOrdinal(x, y); });
            var a2 = (int[])ints.Clone();
            Array.Sort(a2, new IntComparer());
            var s1 = (string[])names.Clone();
            Array.Sort(s1, new NameComparer());

            // LINQ over strings (shared code) and ints.
            var q = names.Where(n => { Capture("where"); return n.Length > 4; })
                         .Select(n => { Capture("select"); return n.ToUpperInvariant(); })
                         .OrderBy(n => { Capture("orderby"); return n; }, StringComparer.Ordinal)
                         .ToList();
            var qi = ints.Where(x => { Capture("iwhere"); return x % 2 == 0; }).Select(x => { Capture("iselect"); return x * 2; }).ToArray();
            var sum = names.Sum(n => { Capture("sum"); return n.Length; });
            var any = names.Any(n => { Capture("any"); return n == "zulu"; });

            // Dictionary and HashSet with a custom comparer.
            var d = new Dictionary<string, int>(new NameComparer());
            foreach (var n in names)
                d[n] = n.Length;
            int v;
            d.TryGetValue("echo", out v);
            var hs = new HashSet<string>(names, new NameComparer());
            hs.Contains("golf");

            // System.Collections: a sorted dictionary, a sorted set.
            var sd = new SortedDictionary<string, int>(new NameComparer());
            foreach (var n in names)
                sd[n] = n.Length;
            var ss = new SortedSet<string>(names, new NameComparer());

            // List.ForEach, Array.ForEach, Array.FindIndex.
            l1.ForEach(n => Capture("foreach"));
            Array.ForEach(ints, x => Capture("aforeach"));
            Array.FindIndex(ints, x => { Capture("find"); return x == -1; });

            // Exceptions thrown inside the framework.
            Throws("parse", () => int.Parse("x" + r));
            Throws("key", () => { var e = new Dictionary<string, int>(); Console.Write(e["missing" + r]); });
            Throws("first", () => Console.Write(names.Where(n => n.Length > 100).First()));
            Throws("index", () => Console.Write(new List<int>()[r + 1]));
            Throws("substring", () => Console.Write("abc".Substring(r + 5)));
            Throws("throwcb", () => l1.ForEach(n => { if (n == "kilo") throw new InvalidOperationException("in a callback"); }));
            Throws("sortcb", () => Array.Sort(s1, (x, y) => { if (x == "lima" || y == "lima") throw new InvalidOperationException("in a comparison"); return 0; }));
            Throws("linqcb", () => names.Select(n => n.Length > 4 ? n : null).Select(n => n.Length).ToList());
            Throws("convert", () => Convert.ToInt32("12z"));
            Throws("guid", () => Guid.Parse("not a guid"));

            Console.Write(q.Count + qi.Length + sum + (any ? 1 : 0) + v + sd.Count + ss.Count > 0 ? "" : " ");
        }
        Console.Out.Write(Out.ToString());
        Console.Out.Flush();
        return 0;
    }
}
