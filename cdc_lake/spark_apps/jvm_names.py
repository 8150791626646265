"""The JVM classes that PySpark and the lake's apps name most often, resolved once per session.

Why: py4j resolves ``jvm.a.b.C`` one dotted component per round trip to the JVM, and the JVM
answers each one with a class lookup; for a package (``a``, ``a.b``) that lookup misses, which
walks every jar on Spark's classpath. A top-level name also tries each of PySpark's wildcard
imports first: ``jvm.functions``, which every ``pyspark.sql.functions`` call resolves, misses six
times before it finds ``org.apache.spark.sql.functions``. Then each static method is looked up
again (``jvm.functions.col``) before it is called. One small commit sent ~9,600 name lookups and
~4,200 member lookups over py4j, about half of all its calls (``bench.commit_cost``, counted).

``pin`` puts those names on the session's JVM view as plain Python attributes, so Python finds
them without a round trip: each class as a py4j ``JavaClass`` of its full name (what py4j itself
returns, holding only the name and the gateway client), the packages on the way to it as
``JavaPackage``s, and a class's static methods kept once looked up. A name that is not pinned
resolves through py4j as before, and a static field is still read from the JVM at every use.

Idempotent and per session (the JVM view belongs to the ``SparkContext``); ``run_app`` calls it,
so the lake server, EMR and the in-process paths all get it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Short names PySpark resolves on the JVM view itself (through its wildcard imports).
TOP_LEVEL = {
    "functions": "org.apache.spark.sql.functions",
    "PythonUtils": "org.apache.spark.api.python.PythonUtils",
    "SparkSession": "org.apache.spark.sql.SparkSession",
}
# Full names resolved component by component (PySpark's, then the lake's:
# cdc_lake/lake/hudi_timeline.py).
DOTTED = (
    "py4j.reflection.TypeUtil",
    "org.apache.spark.util.Utils",
    "org.apache.spark.sql.types.StructType",
    "org.apache.spark.sql.api.python.PythonSQLUtils",
    "org.apache.spark.sql.functions",
    "org.apache.hadoop.fs.Path",
    "org.apache.hudi.storage.hadoop.HadoopStorageConfiguration",
    "org.apache.hudi.common.table.HoodieTableMetaClient",
)
_PINNED = "_cdc_lake_pinned"


@functools.cache
def _pinned_class_type() -> type:
    """A ``JavaClass`` that keeps each static method it has looked up. Built with ``type``: a
    class statement would shadow JavaClass's ``__doc__`` property (it asks the JVM)."""
    from py4j.java_gateway import JavaClass, JavaMember

    def __getattr__(self: Any, name: str) -> Any:
        member = JavaClass.__getattr__(self, name)
        if isinstance(member, JavaMember):
            self.__dict__[name] = member
        return member

    return type("PinnedClass", (JavaClass,), {"__getattr__": __getattr__})


def pin(spark: SparkSession) -> None:
    """Pin ``TOP_LEVEL`` and ``DOTTED`` on the session's JVM view (see the module docstring)."""
    from py4j.java_gateway import JavaPackage

    jvm = spark.sparkContext._jvm
    if jvm is None or jvm.__dict__.get(_PINNED):
        return
    client = spark.sparkContext._gateway._gateway_client  # type: ignore[union-attr]
    classes: dict[str, Any] = {}

    def cls(fqn: str) -> Any:
        if fqn not in classes:
            classes[fqn] = _pinned_class_type()(fqn, client)
        return classes[fqn]

    for short, fqn in TOP_LEVEL.items():
        jvm.__dict__[short] = cls(fqn)
    for fqn in DOTTED:
        *packages, name = fqn.split(".")
        node: Any = jvm
        for i, package in enumerate(packages):
            child = node.__dict__.get(package)
            if child is None:
                child = JavaPackage(".".join(packages[: i + 1]), client, jvm_id=jvm._id)
                node.__dict__[package] = child
            node = child
        node.__dict__[name] = cls(fqn)
    jvm.__dict__[_PINNED] = True
