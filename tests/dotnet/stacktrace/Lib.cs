// Built without a PDB: its frames are `token` frames in every run, and clrmap leaves them.
using System;

namespace Lib
{
    public static class Callbacks
    {
        public static void Run(Action a)
        {
            a();
        }
    }
}
