"""The seam between hardware backends and everything above them: StepModel, StepCost, DecodeBatch, PrefillChunk."""
