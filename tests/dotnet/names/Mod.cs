// Compiled as a netmodule and linked into Names.dll. (mcs scopes these types' TypeRefs to an
// AssemblyRef named after the assembly itself, not to a ModuleRef.)
namespace ModNs
{
    public class Helper<T> { public class Inner { } }
    public struct Pair<A, B> { public A First; public B Second; }
}
