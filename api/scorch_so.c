/* The shared library's own translation unit (api/api.cmake): everything else comes whole from the
 * static library. An identification string, local to the library (api/scorch.map), that what(1)
 * and strings(1) find. */
#include "scorch.h"

const char scorch_so_ident[] = "@(#)libscorch " SCORCH_VERSION;
