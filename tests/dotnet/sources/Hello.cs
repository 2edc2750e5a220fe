namespace Hello;

public static class Greeter
{
    public static string Greet(string name)
    {
        var text = "Hello, " + name;
        return text + "!";
    }
}
