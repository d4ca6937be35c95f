-- Issue #49: a recommendation that carries the dead-end banner is approved with a reason — what
-- is different this time. Kept on the recommendation, beside the banner and in the post-mortem.
ALTER TABLE recommendations ADD COLUMN approve_reason TEXT;
