// The names csi-handover writes onto other people's objects: the label that marks a managed workload, the
// scheduling gate and annotation on its new pods, and the field manager of our status applies.
export const DRIVER_LABEL = 'csi-handover.io/driver';
export const FIELD_MANAGER = 'csi-handover';
/** The scheduling gate that holds a new pod of a managed controller until the old leader's leases are free. */
export const HANDOVER_GATE = 'csi-handover.io/lease-handover';
/** On a gated pod: what it waits for (set while held back; its presence means it waited). */
export const HANDOVER_STATE = 'csi-handover.io/handover-state';
/**
 * On a Lease the operator released: the renewTime of that release record. Whoever watches the Lease (a standby,
 * the next leader) can then tell our release from the holder's own, which client-go writes the same way.
 */
export const RELEASED_BY_OPERATOR = 'csi-handover.io/released-at';
