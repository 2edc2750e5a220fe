// Programs whose inlining is known, for the inline-tree tests (crates/clrmap-cli/tests/cli/inlines.rs):
// [MethodImpl(AggressiveInlining)] and [MethodImpl(NoInlining)], three and two levels deep, across
// two modules (LibMath in Lib.dll, with its own PDB), generic inlinees (a generic method, a
// method of a generic class, and a generic method of Lib.dll instantiated over a struct of
// Prog.dll, and a method of a generic class inlined into shared generic code), an inlinee with a
// loop and an inlinee that throws.
// Each NoInlining host below is a physical body; each AggressiveInlining method must be an inlinee
// of its caller, at the IL offset of its call, and no NoInlining method is ever an inlinee.
//
// Run with tiered compilation off (the runtimeconfig says so), so every body is jitted optimized
// at its first call. Protocol (stdout, stdin):
//   1. prints `pid N`, then `method TYPE::METHOD TOKEN` for each method of Prog, Box`1 and
//      LibMath (its MethodDef token, from reflection), and one `callsite CALLER CALLEE IL_OFFSET` line per call instruction
//      (call, callvirt, newobj) in the methods of Prog, Box`1 and LibMath to a method of these
//      types, found by reading the IL bytes through reflection (the runtime's own account of the
//      IL, not clrmap's), then `ready`;
//   2. waits for a line on stdin (a tracer can attach now), then jits and runs the hosts, prints
//      `result ...` and `done`;
//   3. waits for another line (or the end of stdin), then exits with status 0.
// A line that calls a method ends with a comment `// CALLER calls CALLEE`.
using System;
using System.Collections.Generic;
using System.Reflection;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using InlLib;

namespace Inlining
{
    public class Box<T>
    {
        T value;
        public int Reads;

        public Box(T v)
        {
            value = v;
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        public T Get()
        {
            Reads++;
            return value;
        }
    }

    public struct Pt
    {
        public int X;
        public int Y;
    }

    public static class Prog
    {
        static int sink;

        // Three levels: Chain3 -> Level1 -> Level2 -> Level3; Level2 also calls Never.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Chain3(int n)
        {
            int acc = 0;
            for (int i = 0; i < n; i++)
            {
                acc += Level1(i); // Chain3 calls Level1
            }
            return acc;
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static int Level1(int i)
        {
            sink += i;
            int a = i * 7 + sink;
            return Level2(a) + 1; // Level1 calls Level2
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static int Level2(int a)
        {
            sink ^= a;
            int b = Level3(a + sink); // Level2 calls Level3
            return b + Never(b); // Level2 calls Never
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static int Level3(int b)
        {
            sink -= b;
            int c = b ^ (b >> 3);
            return c + sink;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Never(int x)
        {
            return x & 0xFF;
        }

        // Two levels across modules: LibLoop -> LibMath.Scramble -> LibMath.Rotate (both in Lib.dll).
        [MethodImpl(MethodImplOptions.NoInlining)]
        static int LibLoop(int n)
        {
            int acc = 0;
            for (int i = 0; i < n; i++)
            {
                acc += LibMath.Scramble(i); // LibLoop calls Scramble
            }
            return acc;
        }

        // Generic inlinees: a generic method over int, a method of a generic class over long.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static long GenericHost(int n)
        {
            var box = new Box<long>(5); // GenericHost calls .ctor
            long acc = 0;
            for (int i = 0; i < n; i++)
            {
                acc += Choose(i, n - i, (i & 1) == 0); // GenericHost calls Choose
                acc += box.Get(); // GenericHost calls Get
            }
            return acc + box.Reads;
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static T Choose<T>(T a, T b, bool first)
        {
            sink++;
            if (first)
                return a;
            return b;
        }

        // A generic inlinee of Lib.dll over a type of Prog.dll.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static long CrossGenericHost(int n)
        {
            long acc = 0;
            for (int i = 0; i < n; i++)
            {
                var a = new Pt { X = i, Y = 1 };
                var b = new Pt { X = 2, Y = i };
                Pt p = LibMath.Pick(a, b, (i & 2) == 0); // CrossGenericHost calls Pick
                acc += p.X + p.Y;
            }
            return acc;
        }

        // A shared generic host (its body is for every reference type) inlining a method of a
        // generic class over its own type parameter.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static int SharedHost<T>(T item, int n) where T : class
        {
            var box = new Box<T>(item); // SharedHost calls .ctor
            int acc = 0;
            for (int i = 0; i < n; i++)
            {
                if (box.Get() == item) // SharedHost calls Get
                    acc++;
            }
            return acc + box.Reads;
        }

        // An inlinee with a loop.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static int LoopHost(int n)
        {
            int acc = 0;
            for (int i = 0; i < n; i++)
            {
                acc += SumDigits(i * 97); // LoopHost calls SumDigits
            }
            return acc;
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static int SumDigits(int x)
        {
            int s = 0;
            while (x != 0)
            {
                s += x % 10;
                x /= 10;
            }
            sink += s;
            return s;
        }

        // An inlinee that throws (on its last call here).
        [MethodImpl(MethodImplOptions.NoInlining)]
        static int ThrowHost(int n)
        {
            int acc = 0;
            for (int i = 0; i < n; i++)
            {
                acc += Checked(n - 2 - i); // ThrowHost calls Checked
            }
            return acc;
        }

        [MethodImpl(MethodImplOptions.AggressiveInlining)]
        static int Checked(int x)
        {
            if (x < 0)
                throw new ArgumentOutOfRangeException(nameof(x), x, "negative"); // Checked calls .ctor
            sink += x;
            return x * 2;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Run(int n)
        {
            Console.WriteLine("result chain3 " + Chain3(n)); // Run calls Chain3
            Console.WriteLine("result lib " + LibLoop(n)); // Run calls LibLoop
            Console.WriteLine("result generic " + GenericHost(n)); // Run calls GenericHost
            Console.WriteLine("result cross " + CrossGenericHost(n)); // Run calls CrossGenericHost
            Console.WriteLine("result shared " + SharedHost("s", n)); // Run calls SharedHost
            Console.WriteLine("result loop " + LoopHost(n)); // Run calls LoopHost
            try
            {
                Console.WriteLine("result throw " + ThrowHost(n)); // Run calls ThrowHost
            }
            catch (ArgumentOutOfRangeException e)
            {
                Console.WriteLine("result throw caught " + e.ActualValue);
            }
        }

        static void Main(string[] args)
        {
            Console.WriteLine("pid " + System.Diagnostics.Process.GetCurrentProcess().Id);
            CallSites.Print(typeof(Prog), typeof(Box<>), typeof(LibMath));
            Console.WriteLine("ready");
            Console.Out.Flush();
            Console.ReadLine();
            Run(args.Length > 0 ? int.Parse(args[0]) : 100000);
            Console.WriteLine("done");
            Console.Out.Flush();
            Console.ReadLine();
        }
    }

    // The call instructions of the given types' methods, from their IL bytes (reflection).
    static class CallSites
    {
        public static void Print(params Type[] types)
        {
            var ops = new Dictionary<short, OpCode>();
            foreach (FieldInfo f in typeof(OpCodes).GetFields(BindingFlags.Public | BindingFlags.Static))
            {
                var op = (OpCode)f.GetValue(null);
                ops[op.Value] = op;
            }
            var ours = new HashSet<Type>(types);
            const BindingFlags all = BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Static | BindingFlags.Instance | BindingFlags.DeclaredOnly;
            foreach (Type t in types)
            {
                var methods = new List<MethodBase>(t.GetMethods(all));
                methods.AddRange(t.GetConstructors(all));
                foreach (MethodBase m in methods)
                {
                    Console.WriteLine("method " + t.Name + "::" + m.Name + " " + m.MetadataToken);
                    MethodBody body = m.GetMethodBody();
                    if (body == null)
                        continue;
                    byte[] il = body.GetILAsByteArray();
                    int pos = 0;
                    while (pos < il.Length)
                    {
                        int start = pos;
                        int v = il[pos++];
                        if (v == 0xFE)
                            v = 0xFE00 | il[pos++];
                        OpCode op = ops[unchecked((short)v)];
                        int size;
                        switch (op.OperandType)
                        {
                            case OperandType.InlineNone: size = 0; break;
                            case OperandType.ShortInlineBrTarget:
                            case OperandType.ShortInlineI:
                            case OperandType.ShortInlineVar: size = 1; break;
                            case OperandType.InlineVar: size = 2; break;
                            case OperandType.InlineI8:
                            case OperandType.InlineR: size = 8; break;
                            case OperandType.InlineSwitch: size = 4 + 4 * BitConverter.ToInt32(il, pos); break;
                            default: size = 4; break;
                        }
                        if (op == OpCodes.Call || op == OpCodes.Callvirt || op == OpCodes.Newobj)
                        {
                            MethodBase callee = m.Module.ResolveMethod(BitConverter.ToInt32(il, pos),
                                t.IsGenericTypeDefinition ? t.GetGenericArguments() : null,
                                m.IsGenericMethodDefinition ? m.GetGenericArguments() : null);
                            Type ct = callee.DeclaringType;
                            if (ct.IsGenericType)
                                ct = ct.GetGenericTypeDefinition();
                            if (ours.Contains(ct))
                                Console.WriteLine("callsite " + t.Name + "::" + m.Name + " " + ct.Name + "::" + callee.Name + " " + start);
                        }
                        pos += size;
                    }
                }
            }
        }
    }
}
