"""EnvReader: stripped values, empty means unset, fallbacks in order, and every problem named
in one error."""

from __future__ import annotations

import pytest

from cdc_lake.aws.prod_env import EnvReader, ProdSettingsError


def test_values_are_stripped_empty_is_unset_and_the_first_name_set_wins():
    env = EnvReader({"A": "  ", "B": " b-value ", "C": "c"})
    assert env.get("A") is None
    assert env.find("A", "B", "C") == ("B", "b-value")
    assert env.get("C", "B") == "c"


def test_every_missing_and_bad_variable_is_named_at_once():
    env = EnvReader({"PORT": "80x", "COUNT": "12", "WIDE": "１２"})
    assert env.require("HOST", "HOST_FALLBACK") == ""
    assert env.require("BUCKET") == ""
    assert env.integer("PORT", what="a port") is None
    assert env.integer("COUNT") == 12
    assert env.integer("WIDE") is None  # full-width digits are not decimal ASCII
    assert env.integer("UNSET") is None
    with pytest.raises(ProdSettingsError) as info:
        env.check("missing", " (see docs)")
    message = str(info.value)
    assert message.startswith("missing: HOST, BUCKET. ")
    assert "PORT='80x' is not a port" in message and "WIDE=" in message
    assert "COUNT" not in message and message.endswith(" (see docs)")


def test_a_complete_environment_passes():
    env = EnvReader({"HOST": "h"})
    env.require("HOST")
    env.check("missing")
