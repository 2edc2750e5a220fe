// The independent oracle for `clrmap meta specs`: System.Reflection.Metadata (the runtime's own
// metadata reader) decodes every TypeSpec and MethodSpec, and a type provider written from the
// output contract's §1 notation renders them. clrmap's output must equal this line for line.
// A MethodSpec prints as `Owner::Method<A1,A2>(P1,P2)`: the method it instantiates (a MethodDef,
// or a MemberRef named by its parent), its arguments, and the method's parameter types.
//
//   SrmOracle.dll FILE...            for each file: "== FILE", then its lines
//   SrmOracle.dll --bench N FILE     open FILE and render all specs N times; print ms per run
//   SrmOracle.dll --pdb FILE         FILE is a portable .pdb or an assembly with an embedded PDB:
//                                    every sequence point of every MethodDebugInformation row, in
//                                    row order, as "0x06XXXXXX\tIL\tDOCUMENT\tSL:SC-EL:EC" (or
//                                    "...\tDOCUMENT\thidden"); IL in decimal; then every LocalScope
//                                    row ("scope TOKEN START LENGTH", "  var INDEX ATTRIBUTES NAME")
using System;
using System.Collections.Generic;
using System.Collections.Immutable;
using System.Diagnostics;
using System.IO;
using System.Reflection.Metadata;
using System.Reflection.Metadata.Ecma335;
using System.Reflection.PortableExecutable;
using System.Text;

sealed class Provider : ISignatureTypeProvider<string, object>
{
    readonly MetadataReader md;
    int depth;
    public Provider(MetadataReader md) { this.md = md; }

    public string GetPrimitiveType(PrimitiveTypeCode c)
    {
        switch (c)
        {
            case PrimitiveTypeCode.Void: return "void";
            case PrimitiveTypeCode.Boolean: return "bool";
            case PrimitiveTypeCode.Char: return "char";
            case PrimitiveTypeCode.SByte: return "int8";
            case PrimitiveTypeCode.Byte: return "uint8";
            case PrimitiveTypeCode.Int16: return "int16";
            case PrimitiveTypeCode.UInt16: return "uint16";
            case PrimitiveTypeCode.Int32: return "int32";
            case PrimitiveTypeCode.UInt32: return "uint32";
            case PrimitiveTypeCode.Int64: return "int64";
            case PrimitiveTypeCode.UInt64: return "uint64";
            case PrimitiveTypeCode.Single: return "float32";
            case PrimitiveTypeCode.Double: return "float64";
            case PrimitiveTypeCode.IntPtr: return "native int";
            case PrimitiveTypeCode.UIntPtr: return "native uint";
            case PrimitiveTypeCode.String: return "string";
            case PrimitiveTypeCode.Object: return "object";
            case PrimitiveTypeCode.TypedReference: return "typedref";
        }
        throw new BadImageFormatException("primitive " + c);
    }

    static string Qualified(string ns, string name) { return ns.Length == 0 ? name : ns + "." + name; }

    // rawTypeKind: 0x11 VALUETYPE, 0x12 CLASS, 0 inside a modifier (no keyword).
    static string Keyword(byte rawTypeKind, string name)
    {
        if (rawTypeKind == 0x11) return "valuetype " + name;
        if (rawTypeKind == 0x12) return "class " + name;
        return name;
    }

    public string DefName(TypeDefinitionHandle h)
    {
        var td = md.GetTypeDefinition(h);
        var outer = td.GetDeclaringType();
        if (!outer.IsNil) return DefName(outer) + "/" + md.GetString(td.Name);
        return Qualified(md.GetString(td.Namespace), md.GetString(td.Name));
    }

    public string RefName(TypeReferenceHandle h)
    {
        var tr = md.GetTypeReference(h);
        string name = md.GetString(tr.Name), ns = md.GetString(tr.Namespace);
        var scope = tr.ResolutionScope;
        if (scope.IsNil) return Qualified(ns, name);
        switch (scope.Kind)
        {
            case HandleKind.ModuleReference:
                return "[.module " + md.GetString(md.GetModuleReference((ModuleReferenceHandle)scope).Name) + "]" + Qualified(ns, name);
            case HandleKind.AssemblyReference:
                return "[" + md.GetString(md.GetAssemblyReference((AssemblyReferenceHandle)scope).Name) + "]" + Qualified(ns, name);
            case HandleKind.TypeReference:
                return RefName((TypeReferenceHandle)scope) + "/" + name;
            default:
                return Qualified(ns, name);
        }
    }

    public string GetTypeFromDefinition(MetadataReader r, TypeDefinitionHandle h, byte k) { return Keyword(k, DefName(h)); }
    public string GetTypeFromReference(MetadataReader r, TypeReferenceHandle h, byte k) { return Keyword(k, RefName(h)); }
    public string GetTypeFromSpecification(MetadataReader r, object ctx, TypeSpecificationHandle h, byte k)
    {
        if (++depth > 64) throw new BadImageFormatException("TypeSpec nesting");
        try { return md.GetTypeSpecification(h).DecodeSignature(this, ctx); }
        finally { depth--; }
    }
    public string GetSZArrayType(string e) { return e + "[]"; }
    public string GetPointerType(string e) { return e + "*"; }
    public string GetByReferenceType(string e) { return e + "&"; }
    public string GetPinnedType(string e) { return e + " pinned"; }
    public string GetModifiedType(string m, string t, bool req) { return t + (req ? " modreq(" : " modopt(") + m + ")"; }
    public string GetGenericTypeParameter(object ctx, int i) { return "!" + i; }
    public string GetGenericMethodParameter(object ctx, int i) { return "!!" + i; }
    public string GetGenericInstantiation(string g, ImmutableArray<string> args) { return g + "<" + string.Join(",", args) + ">"; }

    public string GetArrayType(string e, ArrayShape s)
    {
        var sb = new StringBuilder(e).Append('[');
        for (int i = 0; i < s.Rank; i++)
        {
            if (i > 0) sb.Append(',');
            bool hasLo = i < s.LowerBounds.Length, hasSize = i < s.Sizes.Length;
            long lo = hasLo ? s.LowerBounds[i] : 0;
            if (hasLo && hasSize) sb.Append(lo).Append("...").Append(lo + s.Sizes[i] - 1);
            else if (hasSize) sb.Append("0...").Append((long)s.Sizes[i] - 1);
            else if (hasLo) sb.Append(lo).Append("...");
            else sb.Append("...");
        }
        return sb.Append(']').ToString();
    }

    public string GetFunctionPointerType(MethodSignature<string> sig)
    {
        var sb = new StringBuilder("method ");
        if (sig.Header.IsInstance) sb.Append("instance ");
        if (sig.Header.HasExplicitThis) sb.Append("explicit ");
        switch ((int)sig.Header.CallingConvention)
        {
            case 1: sb.Append("unmanaged cdecl "); break;
            case 2: sb.Append("unmanaged stdcall "); break;
            case 3: sb.Append("unmanaged thiscall "); break;
            case 4: sb.Append("unmanaged fastcall "); break;
            case 5: sb.Append("vararg "); break;
            case 9: sb.Append("unmanaged "); break;
        }
        sb.Append(sig.ReturnType).Append(" *(");
        var parts = new List<string>();
        for (int i = 0; i < sig.ParameterTypes.Length; i++)
        {
            if (i == sig.RequiredParameterCount) parts.Add("...");
            parts.Add(sig.ParameterTypes[i]);
        }
        return sb.Append(string.Join(",", parts)).Append(')').ToString();
    }
}

static class SrmOracle
{
    // `Owner::Name` of a MethodSpec's method. A MemberRef's parent (MemberRefParent) is a type,
    // named as a signature names its token, a ModuleRef, or a MethodDef (a vararg call site),
    // which gives its own owner.
    static string MethodName(MetadataReader md, Provider p, EntityHandle m)
    {
        if (m.Kind == HandleKind.MethodDefinition)
        {
            var def = md.GetMethodDefinition((MethodDefinitionHandle)m);
            return p.DefName(def.GetDeclaringType()) + "::" + md.GetString(def.Name);
        }
        var mr = md.GetMemberReference((MemberReferenceHandle)m);
        string owner;
        switch (mr.Parent.Kind)
        {
            case HandleKind.TypeDefinition: owner = p.DefName((TypeDefinitionHandle)mr.Parent); break;
            case HandleKind.TypeReference: owner = p.RefName((TypeReferenceHandle)mr.Parent); break;
            case HandleKind.TypeSpecification:
                owner = md.GetTypeSpecification((TypeSpecificationHandle)mr.Parent).DecodeSignature(p, null);
                break;
            case HandleKind.ModuleReference:
                owner = "[.module " + md.GetString(md.GetModuleReference((ModuleReferenceHandle)mr.Parent).Name) + "]";
                break;
            case HandleKind.MethodDefinition:
                owner = p.DefName(md.GetMethodDefinition((MethodDefinitionHandle)mr.Parent).GetDeclaringType());
                break;
            default: throw new BadImageFormatException("MemberRef parent " + mr.Parent.Kind);
        }
        return owner + "::" + md.GetString(mr.Name);
    }

    // `(P1,P2)`: the method's parameter types; a vararg call site's list ends with `...` where
    // its required parameters end.
    static string MethodParams(MetadataReader md, Provider p, EntityHandle m)
    {
        MethodSignature<string> sig = m.Kind == HandleKind.MethodDefinition
            ? md.GetMethodDefinition((MethodDefinitionHandle)m).DecodeSignature(p, null)
            : md.GetMemberReference((MemberReferenceHandle)m).DecodeMethodSignature(p, null);
        var parts = new List<string>();
        for (int i = 0; i < sig.ParameterTypes.Length; i++)
        {
            if (i == sig.RequiredParameterCount) { parts.Add("..."); break; }
            parts.Add(sig.ParameterTypes[i]);
        }
        return "(" + string.Join(",", parts) + ")";
    }

    static List<string> Lines(string path)
    {
        var lines = new List<string>();
        using (var pe = new PEReader(File.OpenRead(path)))
        {
            if (!pe.HasMetadata) return lines;
            var md = pe.GetMetadataReader();
            var p = new Provider(md);
            int n = md.GetTableRowCount(TableIndex.TypeSpec);
            for (int rid = 1; rid <= n; rid++)
            {
                var h = MetadataTokens.TypeSpecificationHandle(rid);
                string text;
                try { text = md.GetTypeSpecification(h).DecodeSignature(p, null); }
                catch (BadImageFormatException) { text = "!error"; }
                lines.Add(string.Format("0x{0:X8}\t{1}", 0x1B000000 | rid, text));
            }
            n = md.GetTableRowCount(TableIndex.MethodSpec);
            for (int rid = 1; rid <= n; rid++)
            {
                var h = MetadataTokens.MethodSpecificationHandle(rid);
                string text;
                try
                {
                    var spec = md.GetMethodSpecification(h);
                    string args = "<" + string.Join(",", spec.DecodeSignature(p, null)) + ">";
                    text = MethodName(md, p, spec.Method) + args + MethodParams(md, p, spec.Method);
                }
                catch (BadImageFormatException) { text = "!error"; }
                lines.Add(string.Format("0x{0:X8}\t{1}", 0x2B000000 | rid, text));
            }
        }
        return lines;
    }

    // The sequence points of a portable PDB, read by SRM's own MetadataReaderProvider: a
    // standalone PDB through FromPortablePdbStream, an embedded one through the PEReader's
    // ReadEmbeddedPortablePdbDebugDirectoryData (which inflates it).
    static List<string> PdbLines(string path)
    {
        var lines = new List<string>();
        byte[] head = new byte[4];
        using (var f = File.OpenRead(path)) f.Read(head, 0, 4);
        bool standalone = head[0] == (byte)'B' && head[1] == (byte)'S' && head[2] == (byte)'J' && head[3] == (byte)'B';
        PEReader pe = null;
        MetadataReaderProvider provider = null;
        try
        {
            if (standalone)
            {
                provider = MetadataReaderProvider.FromPortablePdbStream(File.OpenRead(path));
            }
            else
            {
                pe = new PEReader(File.OpenRead(path));
                foreach (var entry in pe.ReadDebugDirectory())
                {
                    if (entry.Type == DebugDirectoryEntryType.EmbeddedPortablePdb)
                    {
                        provider = pe.ReadEmbeddedPortablePdbDebugDirectoryData(entry);
                        break;
                    }
                }
                if (provider == null) throw new BadImageFormatException("no embedded portable PDB");
            }
            var md = provider.GetMetadataReader();
            foreach (var h in md.MethodDebugInformation)
            {
                var info = md.GetMethodDebugInformation(h);
                if (info.SequencePointsBlob.IsNil) continue;
                int token = 0x06000000 | MetadataTokens.GetRowNumber(h);
                foreach (var sp in info.GetSequencePoints())
                {
                    string doc = md.GetString(md.GetDocument(sp.Document).Name);
                    string where = sp.IsHidden
                        ? "hidden"
                        : string.Format("{0}:{1}-{2}:{3}", sp.StartLine, sp.StartColumn, sp.EndLine, sp.EndColumn);
                    lines.Add(string.Format("0x{0:X8}\t{1}\t{2}\t{3}", token, sp.Offset, doc, where));
                }
            }
            // Local scopes, in row order: "scope 0x06XXXXXX START LENGTH" then one
            // "  var INDEX ATTRIBUTES NAME" per variable.
            foreach (var h in md.LocalScopes)
            {
                var scope = md.GetLocalScope(h);
                int token = MetadataTokens.GetToken(scope.Method);
                lines.Add(string.Format("scope 0x{0:X8} {1} {2}", token, scope.StartOffset, scope.Length));
                foreach (var vh in scope.GetLocalVariables())
                {
                    var v = md.GetLocalVariable(vh);
                    lines.Add(string.Format("  var {0} {1} {2}", v.Index, (int)v.Attributes, md.GetString(v.Name)));
                }
            }
        }
        finally
        {
            if (provider != null) provider.Dispose();
            if (pe != null) pe.Dispose();
        }
        return lines;
    }

    static int Main(string[] args)
    {
        var stdout = new StreamWriter(Console.OpenStandardOutput(), new UTF8Encoding(false));
        stdout.NewLine = "\n";
        if (args.Length == 3 && args[0] == "--bench")
        {
            int runs = int.Parse(args[1]);
            Lines(args[2]);
            var sw = Stopwatch.StartNew();
            int count = 0;
            for (int i = 0; i < runs; i++) count += Lines(args[2]).Count;
            sw.Stop();
            stdout.WriteLine("{0:F3} ms per run ({1} lines per run, {2} runs)", sw.Elapsed.TotalMilliseconds / runs, count / runs, runs);
            stdout.Flush();
            return 0;
        }
        if (args.Length == 2 && args[0] == "--pdb")
        {
            foreach (var l in PdbLines(args[1])) stdout.WriteLine(l);
            stdout.Flush();
            return 0;
        }
        foreach (var path in args)
        {
            stdout.WriteLine("== " + path);
            try { foreach (var l in Lines(path)) stdout.WriteLine(l); }
            catch (BadImageFormatException) { stdout.WriteLine("!not-an-assembly"); }
        }
        stdout.Flush();
        return 0;
    }
}
