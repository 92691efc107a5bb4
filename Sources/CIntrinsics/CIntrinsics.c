// CIntrinsics is header-only (include/CIntrinsics.h); SwiftPM needs one source file.
#include "CIntrinsics.h"
