"""The suite runs as the CLI does: local files only (glmcot.offline)."""

from glmcot.offline import stay_offline

stay_offline()
