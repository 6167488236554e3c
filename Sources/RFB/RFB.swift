// The RFB (VNC) client engine. Empty until the RFB engine issue lands: nothing here pretends to work.
