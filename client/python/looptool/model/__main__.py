"""`python3 -m looptool.model tune|run --model=...` (looptool.model.commands)."""
import sys

from looptool.model.commands import main

sys.exit(main())
