"""lpxsim: a digital twin of the NVIDIA Groq 3 LPX rack and heterogeneous Vera Rubin + LPX serving.

Every number lpxsim prints traces back to a spec with a source, an assumption with its
reasoning (docs/assumptions.md), or a fitted parameter with the data it was fitted on.
"""

__version__ = "0.1.0"
