import sys

from e2egen.cli import main

sys.exit(main())
