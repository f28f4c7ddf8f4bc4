"""The hook process's file: `<python> -I -S <this file> <harness>` (governor.runtime.hook).

Kept to a few lines: a file run as a script is compiled from its source on every start (about
1.5 ms for the hook's 150 lines), while the module it starts is read from its cached bytecode.
"""

if __name__ == "__main__":
    import os
    import sys

    # Import the package from where this file is, first, so nothing on the user's path or in
    # their project stands in for it.
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    if sys.path and os.path.abspath(sys.path[0]) == here:
        sys.path[0] = root
    else:
        sys.path.insert(0, root)
    from governor.runtime.hook import main

    main(sys.argv[1:])
