// DNS-SD (mDNS service discovery) for Sendspin: the dns_sd API, which Linux gets from Avahi's
// compatibility library (talking to avahi-daemon over the D-Bus system bus) and Apple platforms
// have natively. Swift calls it directly; nothing else is needed here.
#include <dns_sd.h>
