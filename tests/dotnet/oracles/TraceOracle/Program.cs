// TraceEvent's reading of a .nettrace, as JSON lines on stdout: the oracle that
// crates/clrmap-cli/tests/cli/ms_tools.rs compares clrmap's reading of the same file with.
//   dotnet TraceOracle.dll TRACE
// One object a line, by "kind":
//   module  {id, path}                                  ModuleLoad and rundown ModuleDCStop
//   method  {id, rejit, flags, start, size, token, namespace, name, signature, module, rundown}
//                                                       MethodLoadVerbose and rundown MethodDCStopVerbose
//   map     {id, rejit, il:[...], native:[...], rundown} MethodILToNativeMap (and its rundown twin),
//                                                       the raw pairs in the event's order
//   sample  {thread, type, frames:[{address, method, token, module}]}
//                                                       each SampleProfiler ThreadSample's stack from
//                                                       TraceLog, leaf first; method is the TraceLog
//                                                       method's FullMethodName, "" where it has none
//   count   {provider, id, count}                       events by provider and event id (a provider
//                                                       the raw source knows by GUID only is named
//                                                       as TraceLog names it)
//   end     {events, samples, lost}                     totals (lost: the source's EventsLost)
// Numbers are decimal; addresses and ids are unsigned 64-bit.
using System;
using System.Collections.Generic;
using System.IO;
using System.Text;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;
using Microsoft.Diagnostics.Tracing.Parsers;
using Microsoft.Diagnostics.Tracing.Parsers.Clr;

static class TraceOracle
{
    static readonly StringBuilder Line = new StringBuilder();
    static TextWriter Out;

    static string Str(string s)
    {
        var b = new StringBuilder("\"");
        foreach (char c in s ?? "")
        {
            switch (c)
            {
                case '"': b.Append("\\\""); break;
                case '\\': b.Append("\\\\"); break;
                default:
                    if (c < 0x20) b.Append("\\u").Append(((int)c).ToString("x4")); else b.Append(c);
                    break;
            }
        }
        return b.Append('"').ToString();
    }

    static void Emit(string json) { Out.Write(json); Out.Write('\n'); }

    static void Method(MethodLoadUnloadVerboseTraceData d, bool rundown)
    {
        Emit("{\"kind\":\"method\",\"id\":" + (ulong)d.MethodID + ",\"rejit\":" + d.ReJITID + ",\"flags\":" + (int)d.MethodFlags + ",\"start\":" + d.MethodStartAddress
            + ",\"size\":" + d.MethodSize + ",\"token\":" + (uint)d.MethodToken + ",\"namespace\":" + Str(d.MethodNamespace)
            + ",\"name\":" + Str(d.MethodName) + ",\"signature\":" + Str(d.MethodSignature) + ",\"module\":" + (ulong)d.ModuleID
            + ",\"rundown\":" + (rundown ? "true" : "false") + "}");
    }

    static void Map(MethodILToNativeMapTraceData d, bool rundown)
    {
        var il = new StringBuilder();
        var native = new StringBuilder();
        for (int i = 0; i < d.CountOfMapEntries; i++)
        {
            if (i > 0) { il.Append(','); native.Append(','); }
            il.Append(d.ILOffset(i));
            native.Append((uint)d.NativeOffset(i));
        }
        Emit("{\"kind\":\"map\",\"id\":" + (ulong)d.MethodID + ",\"rejit\":" + d.ReJITID + ",\"il\":[" + il + "],\"native\":[" + native
            + "],\"rundown\":" + (rundown ? "true" : "false") + "}");
    }

    static void Module(ModuleLoadUnloadTraceData d)
    {
        Emit("{\"kind\":\"module\",\"id\":" + (ulong)d.ModuleID + ",\"path\":" + Str(d.ModuleILPath) + "}");
    }

    static int Main(string[] args)
    {
        if (args.Length != 1)
        {
            Console.Error.WriteLine("usage: TraceOracle TRACE.nettrace");
            return 2;
        }
        string path = args[0];
        Out = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false), 1 << 16);
        long events = 0;
        int lost;
        // Events by provider and id, from the raw source; a provider it knows only by GUID is
        // named from TraceLog's reading below.
        var counts = new Dictionary<Tuple<Guid, string, int>, long>();
        var names = new Dictionary<Guid, string>();
        // Pass 1: the raw events, as the runtime wrote them.
        using (var source = new EventPipeEventSource(path))
        {
            source.AllEvents += e =>
            {
                events++;
                var key = Tuple.Create(e.ProviderGuid, e.ProviderName, (int)e.ID);
                counts.TryGetValue(key, out long n);
                counts[key] = n + 1;
            };
            source.Clr.MethodLoadVerbose += d => Method(d, false);
            source.Clr.MethodILToNativeMap += d => Map(d, false);
            source.Clr.LoaderModuleLoad += Module;
            var rundown = new ClrRundownTraceEventParser(source);
            rundown.MethodDCStopVerbose += d => Method(d, true);
            rundown.MethodILToNativeMapDCStop += d => Map(d, true);
            rundown.LoaderModuleDCStop += Module;
            source.Process();
            lost = source.EventsLost;
        }
        // Pass 2: the samples' stacks, as TraceLog (PerfView's model) resolves them.
        long samples = 0;
        string etlx = Path.Combine(Path.GetTempPath(), "trace-oracle-" + Environment.ProcessId + ".etlx");
        try
        {
            TraceLog.CreateFromEventPipeDataFile(path, etlx);
            using (var log = new TraceLog(etlx))
            {
                foreach (TraceEvent e in log.Events)
                {
                    names[e.ProviderGuid] = e.ProviderName;
                    if (e.ProviderName != "Microsoft-DotNETCore-SampleProfiler" || (int)e.ID != 0)
                        continue;
                    samples++;
                    var frames = new StringBuilder();
                    for (TraceCallStack cs = e.CallStack(); cs != null; cs = cs.Caller)
                    {
                        TraceCodeAddress a = cs.CodeAddress;
                        TraceMethod m = a.Method;
                        if (frames.Length > 0) frames.Append(',');
                        frames.Append("{\"address\":" + a.Address + ",\"method\":" + Str(m == null ? "" : m.FullMethodName)
                            + ",\"token\":" + (m == null ? 0 : (uint)m.MethodToken) + ",\"module\":" + Str(a.ModuleName) + "}");
                    }
                    // The payload: the sample's type as the runtime writes it (0 error, 1 external, 2 managed).
                    byte[] payload = e.EventData();
                    int type = payload.Length >= 4 ? BitConverter.ToInt32(payload, 0) : -1;
                    Emit("{\"kind\":\"sample\",\"thread\":" + e.ThreadID + ",\"type\":" + type + ",\"frames\":[" + frames + "]}");
                }
            }
        }
        finally
        {
            try { File.Delete(etlx); } catch (IOException) { }
        }
        foreach (var c in counts)
        {
            string name = c.Key.Item2;
            if (name.StartsWith("Provider(", StringComparison.Ordinal) && names.TryGetValue(c.Key.Item1, out string known))
                name = known;
            Emit("{\"kind\":\"count\",\"provider\":" + Str(name) + ",\"id\":" + c.Key.Item3 + ",\"count\":" + c.Value + "}");
        }
        Emit("{\"kind\":\"end\",\"events\":" + events + ",\"samples\":" + samples + ",\"lost\":" + lost + "}");
        Out.Flush();
        return 0;
    }
}
