import sys

from factory.cli import main

sys.exit(main())
