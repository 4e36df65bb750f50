"""Tree sequences for the tskit, tszip and remote tests: msprime simulations, one with what SLiM writes,
and three files SLiM wrote itself.

tskit's wheel ships no test data, so :data:`SLIM_FILES` are copies of SLiM-written files from tskit's and
pyslim's repositories (tests/data/slim/README.md names them). They have no reference sequence or
migrations, so :func:`slim_like` also builds a tree sequence with the parts SLiM files have that
msprime's lack: struct-codec metadata on nodes, individuals and mutations, individuals with locations
and parents, a JSON top-level metadata block, ``ticks`` time units, a reference sequence, and migrations.
"""

from __future__ import annotations

from pathlib import Path

import msprime
import numpy as np
import tskit

# SLiM-written files, by the test kind that names them.
SLIM_FILES = {f"slim:{path.stem}": path for path in sorted((Path(__file__).parent / "data" / "slim").glob("*.trees"))}


def simulated(samples: int = 50, length: float = 1e5, seed: int = 1) -> tskit.TreeSequence:
    """An msprime ancestry with mutations (recombining, so many trees)."""
    ancestry = msprime.sim_ancestry(samples, sequence_length=length, recombination_rate=1e-8,
                                    population_size=10_000, random_seed=seed)
    return msprime.sim_mutations(ancestry, rate=1e-8, random_seed=seed + 1)


def slim_like(seed: int = 7) -> tskit.TreeSequence:
    """Two demes with migrations recorded, then SLiM's kinds of metadata, individuals and reference sequence."""
    demography = msprime.Demography.island_model([500, 500], migration_rate=0.01)
    ancestry = msprime.sim_ancestry({"pop_0": 8, "pop_1": 8}, demography=demography, sequence_length=2e4,
                                    recombination_rate=1e-8, record_migrations=True, random_seed=seed)
    tables = msprime.sim_mutations(ancestry, rate=2e-8, random_seed=seed).dump_tables()
    tables.time_units = "ticks"
    tables.metadata_schema = tskit.MetadataSchema({"codec": "json", "type": "object", "properties": {
        "SLiM": {"type": "object", "properties": {"model_type": {"type": "string"}, "tick": {"type": "integer"}}}}})
    tables.metadata = {"SLiM": {"model_type": "WF", "tick": 1000}}
    struct = {"codec": "struct", "type": "object", "properties": {
        "slim_id": {"type": "integer", "binaryFormat": "q", "index": 0},
        "is_null": {"type": "boolean", "binaryFormat": "?", "index": 1}}}
    nodes = tables.nodes.copy()
    tables.nodes.clear()
    tables.nodes.metadata_schema = tskit.MetadataSchema(struct)
    for index, node in enumerate(nodes):
        tables.nodes.append(node.replace(metadata={"slim_id": index, "is_null": False}))
    individuals = tables.individuals.copy()
    tables.individuals.clear()
    tables.individuals.metadata_schema = tskit.MetadataSchema(struct)
    rng = np.random.default_rng(seed)
    for index, individual in enumerate(individuals):
        tables.individuals.append(individual.replace(location=rng.random(3), parents=[-1, -1],
                                                     metadata={"slim_id": 10_000 + index, "is_null": False}))
    mutations = tables.mutations.copy()
    tables.mutations.clear()
    tables.mutations.metadata_schema = tskit.MetadataSchema(struct)
    for index, mutation in enumerate(mutations):
        tables.mutations.append(mutation.replace(metadata={"slim_id": 20_000 + index, "is_null": False}))
    tables.reference_sequence.data = "".join(rng.choice(list("ACGT"), int(tables.sequence_length)))
    tables.reference_sequence.url = "https://example.org/reference.fa"
    return tables.tree_sequence()
