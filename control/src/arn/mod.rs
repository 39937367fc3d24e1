//! Adaptive Routing Notifications (draft-wh-rtgwg-adaptive-routing-arn): codec, monitor, sender/receiver.
