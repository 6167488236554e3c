// The Sendspin player. Empty until the Sendspin player issue lands: nothing here pretends to work.
