// Frames: the oracle for frame -> IL offset -> source line (shared/spec/symbols.md section 2).
// At many capture points it takes `new StackTrace(true)` and prints one line per frame of its own module:
//   F \t capture \t frame index \t 0xTOKEN \t module \t native offset \t IL offset \t file \t line \t column \t Type::Method
// In two catch blocks it also prints the exception's own trace, `new StackTrace(e, true)`, the same way
// but with the tag E (throw frames follow their own rule).
// C# 7.3 (Roslyn 2.10). Built by scripts/build-frame-fixtures.sh. Run with tiered compilation off.
// Do not reformat: the fixtures' line and column numbers come from this file's layout.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Frames
{
    public static class Trace
    {
        static int s_capture;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Capture()
        {
            Print("F", new StackTrace(true));
        }

        // A capture that is also a value, for use inside expressions and argument lists.
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int CaptureValue(int v)
        {
            Print("F", new StackTrace(true));
            return v;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void CaptureException(Exception e)
        {
            Print("E", new StackTrace(e, true));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Print(string tag, StackTrace trace)
        {
            int id = ++s_capture;
            var own = typeof(Trace).Module;
            var sb = new StringBuilder();
            for (int i = 0; i < trace.FrameCount; i++)
            {
                StackFrame f = trace.GetFrame(i);
                var m = f.GetMethod();
                if (m == null || m.Module != own)
                    continue;
                sb.Append(tag).Append('\t')
                  .Append(id).Append('\t')
                  .Append(i).Append('\t')
                  .Append("0x").Append(m.MetadataToken.ToString("X8")).Append('\t')
                  .Append(m.Module.Name).Append('\t')
                  .Append(f.GetNativeOffset()).Append('\t')
                  .Append(f.GetILOffset()).Append('\t')
                  .Append(f.GetFileName() ?? "").Append('\t')
                  .Append(f.GetFileLineNumber()).Append('\t')
                  .Append(f.GetFileColumnNumber()).Append('\t')
                  .Append(TypeName(m.DeclaringType)).Append("::").Append(m.Name)
                  .Append('\n');
            }
            Console.Out.Write(sb.ToString());
        }

        static string TypeName(Type t)
        {
            if (t == null)
                return "";
            if (t.IsGenericType && !t.IsGenericTypeDefinition)
                t = t.GetGenericTypeDefinition();
            return t.FullName ?? t.Name;
        }
    }

    // Nested calls.
    public static class Nested
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Outer(int x)
        {
            Trace.Capture();
            int r = Middle(x + 1);
            Trace.Capture();
            return r + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Middle(int x)
        {
            int a = Inner(x);
            Trace.Capture();
            int b = Inner(a);
            return a + b;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Inner(int x)
        {
            Trace.Capture();
            return x * 2;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Recurse(int n)
        {
            if (n == 0)
            {
                Trace.Capture();
                return 0;
            }
            int r = Recurse(n - 1);
            return r + n;
        }
    }

    // Generic methods: reference-type instantiations share one native body (__Canon); int has its own.
    public static class Generic
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static T Pass<T>(T value)
        {
            Trace.Capture();
            return value;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Count<T>(IEnumerable<T> items)
        {
            int n = 0;
            foreach (var item in items)
            {
                if (n == 1)
                    Trace.Capture();
                n++;
            }
            return n;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static string Pair<A, B>(A a, B b) where A : class where B : class
        {
            Trace.Capture();
            string s = a.ToString() + b.ToString();
            return Pass(s);
        }
    }

    // A generic type: Box<string>, Box<object> (shared code) and Box<int> (its own code).
    public class Box<T>
    {
        T _value;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public Box(T value)
        {
            _value = value;
            Trace.Capture();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public T Get()
        {
            Trace.Capture();
            return _value;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public U Map<U>(Func<T, U> f)
        {
            U u = f(_value);
            Trace.Capture();
            return u;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static Box<T> Make(T value)
        {
            var b = new Box<T>(value);
            Trace.Capture();
            return b;
        }
    }

    // Virtual and interface calls, a struct method and a property.
    public interface IShape
    {
        int Area();
    }

    public abstract class Shape : IShape
    {
        public abstract int Area();

        [MethodImpl(MethodImplOptions.NoInlining)]
        public virtual string Describe()
        {
            Trace.Capture();
            return GetType().Name;
        }
    }

    public sealed class Square : Shape
    {
        readonly int _side;

        public Square(int side)
        {
            _side = side;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public override int Area()
        {
            Trace.Capture();
            return _side * _side;
        }

        public int Side
        {
            [MethodImpl(MethodImplOptions.NoInlining)]
            get
            {
                Trace.Capture();
                return _side;
            }
        }
    }

    public struct Point
    {
        public int X, Y;

        [MethodImpl(MethodImplOptions.NoInlining)]
        public int Dot(Point o)
        {
            Trace.Capture();
            return X * o.X + Y * o.Y;
        }
    }

    // More shapes of code: a static constructor, an indexer, an operator, switch, using, lock, loops,
    // a generic virtual method, an exception filter, query syntax and an interpolated string over lines.
    public class More : IDisposable
    {
        static readonly int s_init;

        static More()
        {
            Trace.Capture();
            s_init = 1;
        }

        readonly int[] _items = { 1, 2, 3 };

        public int this[int i]
        {
            [MethodImpl(MethodImplOptions.NoInlining)]
            get
            {
                Trace.Capture();
                return _items[i] + s_init;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static More operator +(More a, More b)
        {
            Trace.Capture();
            return a;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public void Dispose()
        {
            Trace.Capture();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public virtual string Visit<T>(T item) where T : class
        {
            Trace.Capture();
            return item.ToString();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public int Twice(int x) => Trace.CaptureValue(x) * 2;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Switch(int k)
        {
            switch (k)
            {
                case 0:
                    Trace.Capture();
                    return 10;
                case 1:
                    Trace.Capture();
                    return 11;
                default:
                    Trace.Capture();
                    return 12;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static bool Filter(Exception e)
        {
            Trace.Capture();
            return e is ArgumentException;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Throw()
        {
            throw new ArgumentException("filtered");
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Run()
        {
            int sum = 0;
            using (var m = new More())
            {
                Trace.Capture();
                sum += m[1];
                sum += (m + m).Twice(3);
                sum += m.Visit("visited").Length + new Derived().Visit(new object()).Length;
            }
            for (int k = 0; k < 3; k++)
                sum += Switch(k);
            lock (typeof(More))
            {
                Trace.Capture();
                sum++;
            }
            int n = 0;
            do
            {
                Trace.Capture();
                n++;
            } while (n < 2);
            try
            {
                Throw();
            }
            catch (Exception e) when (Filter(e))
            {
                Trace.Capture();
                sum++;
            }
            var query = from x in new[] { 1, 2, 3 }
                        where Trace.CaptureValue(x) > 1
                        select Trace.CaptureValue(x * 2);
            sum += query.Sum();
            string text = $@"{sum} and {
                Trace.CaptureValue(n)} and {n > 1}";
            sum += text.Length > 0
                ? Trace.CaptureValue(1)
                : 0;
            return sum;
        }
    }

    public sealed class Derived : More
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public override string Visit<T>(T item)
        {
            Trace.Capture();
            return base.Visit(item);
        }
    }

    // An awaitable that always suspends, then resumes deterministically: inline (inside OnCompleted, a
    // deeper stack) or on a new thread that OnCompleted joins (a stack with only the state machine).
    // Unlike Task.Yield, no thread-pool race changes the stacks from run to run.
    public struct Resume : ICriticalNotifyCompletion
    {
        readonly bool _onThread;

        public Resume(bool onThread)
        {
            _onThread = onThread;
        }

        public Resume GetAwaiter() => this;

        public bool IsCompleted => false;

        public void GetResult()
        {
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public void OnCompleted(Action continuation)
        {
            if (_onThread)
            {
                var t = new Thread(() => continuation());
                t.Start();
                t.Join();
            }
            else
            {
                continuation();
            }
        }

        public void UnsafeOnCompleted(Action continuation) => OnCompleted(continuation);
    }

    public static class Program
    {
        static int s_sink;

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Sink(int v)
        {
            s_sink += v;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Leaf(int v)
        {
            return v + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Apply(Func<int, int> f, int v)
        {
            int r = f(v);
            return r;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int Combine(int a, int b, int c)
        {
            Trace.Capture();
            return a + b + c;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void NestedCalls()
        {
            Sink(Nested.Outer(1));
            Sink(Nested.Recurse(3));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Generics()
        {
            Sink(Generic.Pass("text").Length);
            Sink(Generic.Pass(new object()).GetHashCode() & 1);
            Sink(Generic.Pass(42));
            Sink(Generic.Count(new List<string> { "a", "b", "c" }));
            Sink(Generic.Count(new[] { 1, 2, 3 }));
            Sink(Generic.Pair("a", new StringBuilder("b")).Length);

            var bs = Box<string>.Make("boxed");
            Sink(bs.Get().Length);
            var bo = new Box<object>(new List<int>());
            Sink(bo.Get() == null ? 0 : 1);
            var bi = Box<int>.Make(7);
            Sink(bi.Get());
            Sink(bs.Map(s => s.Length));
            Sink(bi.Map(i => i.ToString()).Length);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Lambdas(int seed)
        {
            int captured = seed;
            Func<int, int> addCaptured = x =>
            {
                Trace.Capture();
                return x + captured;
            };
            Func<int, int> noCapture = x =>
            {
                Trace.Capture();
                return x * 3;
            };
            Sink(addCaptured(1));
            Sink(noCapture(2));
            captured++;
            Sink(Apply(addCaptured, 3));

            int Local(int x)
            {
                Trace.Capture();
                return x + captured;
            }
            Sink(Local(4));

            Action nested = () =>
            {
                Func<int> inner = () => Trace.CaptureValue(captured);
                Sink(inner());
            };
            nested();
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Linq()
        {
            int[] numbers = { 1, 2, 3, 4, 5 };
            int offset = 10;
            var selected = numbers
                .Where(n => n % 2 == 1 && Trace.CaptureValue(n) > 0)
                .Select(n => Trace.CaptureValue(n + offset))
                .ToList();
            Sink(selected.Count);
            Sink(numbers.Select(n => n * 2).Where(n => n > 6).Sum(n => Trace.CaptureValue(n)));
            Sink(Generic.Count(Iterate(3)));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static IEnumerable<int> Iterate(int n)
        {
            for (int i = 0; i < n; i++)
            {
                Trace.Capture();
                yield return i;
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Thrower(int depth)
        {
            if (depth == 0)
            {
                Trace.Capture();
                throw new InvalidOperationException("boom");
            }
            Thrower(depth - 1);
            Sink(depth);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Exceptions()
        {
            try
            {
                Trace.Capture();
                Thrower(2);
                Sink(1);
            }
            catch (InvalidOperationException e)
            {
                Trace.Capture();
                Trace.CaptureException(e);
                Sink(2);
            }
            finally
            {
                Trace.Capture();
                Sink(3);
            }

            try
            {
                Sink(Leaf(1));
            }
            finally
            {
                Sink(Leaf(2));
                Trace.Capture();
            }

            try
            {
                try
                {
                    Thrower(0);
                }
                finally
                {
                    Trace.Capture();
                }
            }
            catch (Exception e) when (e.Message.Length > 0)
            {
                Trace.CaptureException(e);
                Trace.Capture();
            }
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static async Task<int> StepAsync(int v)
        {
            Trace.Capture();
            await Task.FromResult(0);
            Trace.Capture();
            await new Resume(false);
            Trace.Capture();
            await new Resume(true);
            Trace.Capture();
            return v + 1;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static async Task<int> OuterAsync()
        {
            int a = await StepAsync(1);
            Trace.Capture();
            int b = await StepAsync(a);
            Trace.Capture();
            return b;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Async()
        {
            Sink(OuterAsync().GetAwaiter().GetResult());
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void LineDirectives()
        {
            Sink(Leaf(0));
#line 500 "Other.cs"
            Trace.Capture();
            Sink(Leaf(500));
            Trace.Capture();
#line hidden
            Sink(Leaf(1));
            Trace.Capture();
#line default
            Trace.Capture();
#line hidden
            Trace.Capture();
#line 600 "Other.cs"
            Sink(Trace.CaptureValue(600));
#line default
            Sink(Trace.CaptureValue(1));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void MultiLine()
        {
            int k = 5;
            int total = Combine(
                Leaf(1),
                Apply(x =>
                {
                    Trace.Capture();
                    return x + k;
                }, 2),
                Trace.CaptureValue(
                    Leaf(3)));
            Sink(total);
            Sink(Combine(Leaf(4),
                         Trace.CaptureValue(k), Leaf(6)));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Objects()
        {
            Shape sq = new Square(3);
            Sink(sq.Area());
            IShape shape = sq;
            Sink(shape.Area());
            Sink(sq.Describe().Length);
            Sink(((Square)sq).Side);
            var p = new Point { X = 1, Y = 2 };
            Sink(p.Dot(new Point { X = 3, Y = 4 }));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void Round(int round)
        {
            Trace.Capture();
            NestedCalls();
            Generics();
            Lambdas(round);
            Linq();
            Exceptions();
            Async();
            LineDirectives();
            MultiLine();
            Objects();
            Sink(More.Run());
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static int Main(string[] args)
        {
            for (int round = 0; round < 2; round++)
            {
                Round(round);
            }
            Trace.Capture();
            Console.Out.Flush();
            return s_sink == 0 ? 1 : 0;
        }
    }
}
