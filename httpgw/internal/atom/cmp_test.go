package atom

import (
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cmpOpts compare decoded descriptions: NaN equals NaN, empty and nil
// slices are equal.
var cmpOpts = []cmp.Option{cmpopts.EquateNaNs(), cmpopts.EquateEmpty()}
