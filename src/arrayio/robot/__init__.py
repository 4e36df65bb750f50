"""The robot-learning toolkit over kdb files: what people do with episodes, not the file format.

- :mod:`arrayio.robot.torch`: PyTorch datasets (FrameDataset, EpisodeDataset, mixtures, GPU loader)
- :mod:`arrayio.robot.lerobot`: LeRobot datasets to kdb and back
- :mod:`arrayio.robot.tools`: merge, split, filter, re-encode, stats (the ``arrayio kdb`` verbs)
- :mod:`arrayio.robot.convert`: HDF5 ingest and .npz export
- :mod:`arrayio.robot.plot`: an episode's states and actions as a PNG
- :mod:`arrayio.robot.dask`: episodes as a dask bag

Every module reads kdb files through :mod:`arrayio.kdb`'s public API only (``open``, ``KdbFile``
and its batched ``image_table`` / ``image_bytes`` / ``prefetch_episodes``, ``Writer``, the image
codec names); the format package never imports this one.
"""
