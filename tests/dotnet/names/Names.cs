// Exercises every name form of contract §1: TypeDefs nested (Outer/Inner), in the empty
// namespace, TypeRefs scoped to an AssemblyRef, to another TypeRef (nested), and to a ModuleRef.
using System.Collections.Generic;

public class NoNamespace<T> { public class Nested<U> { } }

namespace Fixture
{
    public class Outer<T>
    {
        public class Inner<U> { public struct Deepest { } }
    }

    public static class Uses
    {
        public static object Make<T>() { return null; }
        public static void All()
        {
            Make<NoNamespace<int>.Nested<string>>();
            Make<Outer<int>.Inner<long>>();
            Make<Outer<int>.Inner<long>.Deepest[,]>();
            Make<Dictionary<string, List<int>>.Enumerator>();
            Make<ModNs.Helper<int>>();
            Make<ModNs.Helper<string>.Inner>();
            Make<ModNs.Pair<int, Outer<string>>>();
            Make<int[][]>();
            Make<KeyValuePair<int, string>>();
        }
    }
}
