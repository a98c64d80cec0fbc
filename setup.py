"""Packaging of ldp-telemetry.

One import name is installed, `ldp_telemetry`; its subpackages are the folders at the top of the
repository (`ldp/` the Beam-free mathematics, `output/` the Beam-free output contract,
`schemas/`, `client/` the devices' encoder, `transforms/`, `pipelines/`, `runners/`, `store/`,
`dashboard/`), mapped with `package_dir`. `ldp_telemetry` itself is a namespace package (it
has no `__init__.py`), so no folder of the checkout can stand in for the installed package: code
and tests always import what was installed.
"""
from setuptools import setup

SUBPACKAGES = {
    "ldp": ["ldp", "ldp.base", "ldp.protocols", "ldp.integrity", "ldp.estimation", "ldp.config",
            "ldp.engine"],
    "output": ["output"],
    "schemas": ["schemas"],
    "client": ["client"],
    "transforms": ["transforms"],
    "pipelines": ["pipelines"],
    "runners": ["runners"],
    "store": ["store"],
    "dashboard": ["dashboard"],
}

packages, package_dir = [], {}
for names in SUBPACKAGES.values():
    for name in names:
        packages.append(f"ldp_telemetry.{name}")
        package_dir[f"ldp_telemetry.{name}"] = name.replace(".", "/")

setup(
    name="ldp-telemetry",
    version="0.2.0",
    description="Streaming aggregation of telemetry collected under local differential privacy, "
                "on Apache Beam.",
    python_requires=">=3.10",
    packages=packages,
    package_dir=package_dir,
    # py.typed (PEP 561): the Beam-free packages that mypy checks ship their annotations
    package_data={"ldp_telemetry.ldp": ["py.typed"], "ldp_telemetry.output": ["py.typed"],
                  "ldp_telemetry.schemas": ["*.avsc", "*.schema.json", "py.typed"],
                  "ldp_telemetry.ldp.config": ["aggregation_cost.json"],
                  "ldp_telemetry.client": ["test_vectors.json", "py.typed"],
                  "ldp_telemetry.dashboard": ["static/*.js", "static/*.css",
                                              "static/*.LICENSE"]},
    # Beam and fastavro to the tested minor versions: the code leans on some of their internals
    # (tests/test_dependency_contract.py lists and checks each); move a pin with that test.
    install_requires=["apache-beam>=2.77,<2.78", "numpy>=2.0", "scipy>=1.10",
                      "fastavro>=1.13,<1.14",
                      "cramjam>=2.6"],  # fastavro's snappy codec
    extras_require={"test": ["pytest>=7", "avro>=1.11", "hypothesis>=6.100",
                             "ruff>=0.17,<0.18",  # the lint .ci/run runs (rules in pyproject.toml)
                             "mypy>=2.4,<2.5",  # the type check .ci/run runs (pyproject.toml)
                             "packaging>=22",  # reading the pins in the dependency contract
                             # fastavro writes zstandard and lz4 files for the fuzzer's seeds
                             "backports.zstd>=1.0; python_version < '3.14'", "lz4>=4.0",
                             "psycopg[binary]>=3.1",  # the PostgreSQL store's test
                             "jsonschema>=4.18",  # the registry's JSON Schema
                             "selenium>=4.10"],  # the dashboard's browser tests (system chromium)
                    # the estimate store on PostgreSQL (SQLite needs nothing)
                    "postgres": ["psycopg[binary]>=3.1"],
                    # DataflowRunner, including its offline dry run (about 85 more packages)
                    "dataflow": ["apache-beam[gcp]>=2.77,<2.78"],
                    # `--runner=dask`: Beam's DaskRunner on a dask.distributed cluster (the
                    # floor is Beam 2.77's own dask extra; tested with 2026.8)
                    "dask": ["apache-beam[dask]>=2.77,<2.78", "dask>=2024.4.2,<2027",
                             "distributed>=2024.4.2,<2027"]},
    entry_points={"console_scripts": ["ldp=ldp_telemetry.pipelines.cli:main"]},
)
