import sys

if sys.argv[1:2] == ["info"]:  # metadata only: answered without importing torch, diffusers or the commands
    from .files.info import main as info

    sys.exit(info(sys.argv[2:]))

from .cli import main

sys.exit(main())
