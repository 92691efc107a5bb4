// Privileges the daemon gives up at start (Service.run).
#include <sys/prctl.h>

#include "CSystemCalls.h"

int lookupd_no_new_privileges(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}
