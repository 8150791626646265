"""The Dagster entry point: everything under ``cdc_lake/defs``.

Loading the definitions connects to nothing; resources reach their services only when a run or a
sensor tick uses them.
"""

from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
