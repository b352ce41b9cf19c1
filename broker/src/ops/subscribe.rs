//! Event subscriptions, served: SubscribeEvents and UnsubscribeEvents. One subscription per
//! connection, replaced by the next (see `crate::events`); the queue name is validated as
//! bunqueue does (`Queue name is required`, …) when the request is read.

use autobatch_core::ops::{SubscribeEvents, UnsubscribeEvents};

use crate::context::{Ctx, Served};

pub(crate) fn subscribe(cx: &Ctx<'_>, op: SubscribeEvents) -> Served<()> {
    cx.state()
        .events
        .subscribe(cx.conn.id, &op.queue, cx.conn.events.clone());
    Ok(())
}

pub(crate) fn unsubscribe(cx: &Ctx<'_>, _: UnsubscribeEvents) -> Served<()> {
    cx.state().events.unsubscribe(cx.conn.id);
    Ok(())
}
